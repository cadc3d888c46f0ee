package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// complianceRow is one cluster's compliance with its hub and, when the
// inventory holds the cluster, its ids.
type complianceRow struct {
	PolicyID         string
	HubID            string
	ClusterName      string
	State            string
	UpdatedAt        time.Time
	HubName          string
	HubZone          string
	HubRegion        string
	ManagedClusterID *string
	RegistrationID   *string
}

func (r complianceRow) toCompliance() fleet.ClusterCompliance {
	return fleet.ClusterCompliance{PolicyID: r.PolicyID, Hub: fleet.HubRef{ID: r.HubID, Name: r.HubName, Zone: r.HubZone, Region: r.HubRegion},
		ClusterName: r.ClusterName, ManagedClusterID: deref(r.ManagedClusterID), RegistrationID: deref(r.RegistrationID),
		State: fleet.ComplianceState(r.State), UpdatedAt: r.UpdatedAt}
}

var complianceList = listSpec{
	search: SearchSchema{
		"cluster_name": {Column: "c.cluster_name", Type: FieldText}, "state": {Column: "c.state", Type: FieldText},
		"hub_id": {Column: "c.hub_id", Type: FieldText}, "hub_name": {Column: "h.name", Type: FieldText},
		"zone": {Column: "c.zone", Type: FieldText}, "registration_id": {Column: "mc.registration_id", Type: FieldText},
		"managed_cluster_id": {Column: "mc.id", Type: FieldText}, "updated_at": {Column: "c.updated_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{
		"cluster_name": "c.cluster_name", "hub_name": "h.name", "state": "c.state", "updated_at": "c.updated_at",
	},
	tiebreak:     "c.hub_id, c.cluster_name",
	defaultOrder: "c.cluster_name",
}

// complianceVisibleSQL keeps the compliance rows an organisation may see,
// with mc and r the row's cluster in the inventory and its registration: a
// cluster the inventory holds only under the inventory's visibility rule
// (visibleTo), since a hub's report may name another organisation's cluster
// on a shared hub, and its name, state and ids are that organisation's; a
// cluster the inventory does not hold yet, with no ids to show.
const complianceVisibleSQL = `(mc.id IS NULL OR h.owner_org_id = ? OR (h.owner_org_id IS NULL AND r.org_id = ?))`

// ListCompliance returns a page of one of the organisation's policies'
// per-cluster compliance, as the hubs last reported it.
func (s *PolicyStore) ListCompliance(ctx context.Context, org, policyID string, q fleet.ListQuery) ([]fleet.ClusterCompliance, int, error) {
	if _, err := s.FindPolicy(ctx, org, policyID); err != nil {
		return nil, 0, err
	}
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	query := s.inServedZones(s.db.Gorm.WithContext(ctx).Table("policy_compliance AS c").
		Select(`c.*, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region, mc.id AS managed_cluster_id, mc.registration_id`).
		Joins("JOIN hubs h ON h.id = c.hub_id AND h.deleted_at IS NULL").
		Joins("LEFT JOIN managed_clusters mc ON mc.hub_id = c.hub_id AND mc.name = c.cluster_name AND mc.deleted_at IS NULL").
		Joins("LEFT JOIN registrations r ON r.id = mc.registration_id").
		Where("c.policy_id = ?", policyID).Where(complianceVisibleSQL, org, org), "c.zone")
	rows, total, err := list[complianceRow](query, complianceList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListCompliance(%s/%s): %w", org, policyID, err)
	}
	out := make([]fleet.ClusterCompliance, len(rows))
	for i, r := range rows {
		out[i] = r.toCompliance()
	}
	return out, total, nil
}

// ComplianceSummary counts the clusters of one of the organisation's
// policies (all of them when policyID is empty) per state, per hub and per
// zone. A cluster counts once per policy it is subject to.
func (s *PolicyStore) ComplianceSummary(ctx context.Context, org, policyID string) (fleet.ComplianceSummary, error) {
	var sum fleet.ComplianceSummary
	if policyID != "" {
		if _, err := s.FindPolicy(ctx, org, policyID); err != nil {
			return sum, err
		}
	}
	query := s.inServedZones(s.db.Gorm.WithContext(ctx).Table("policy_compliance AS c").
		Select("c.hub_id, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region, c.state, count(*) AS n").
		Joins("JOIN hubs h ON h.id = c.hub_id AND h.deleted_at IS NULL").
		Joins("JOIN policies p ON p.id = c.policy_id AND p.deleted_at IS NULL AND p.org_id = ?", org).
		Joins("LEFT JOIN managed_clusters mc ON mc.hub_id = c.hub_id AND mc.name = c.cluster_name AND mc.deleted_at IS NULL").
		Joins("LEFT JOIN registrations r ON r.id = mc.registration_id").
		Where(complianceVisibleSQL, org, org), "c.zone").
		Group("c.hub_id, h.name, h.zone, h.region, c.state")
	if policyID != "" {
		query = query.Where("c.policy_id = ?", policyID)
	}
	var rows []struct {
		HubID, HubName, HubZone, HubRegion, State string
		N                                         int
	}
	if err := query.Scan(&rows).Error; err != nil {
		return sum, fmt.Errorf("ComplianceSummary(%s/%s): %w", org, policyID, err)
	}
	hubs, zones := map[string]*fleet.HubCompliance{}, map[string]*fleet.ZoneCompliance{}
	for _, r := range rows {
		state := fleet.ComplianceState(r.State)
		sum.Add(state, r.N)
		if hubs[r.HubID] == nil {
			hubs[r.HubID] = &fleet.HubCompliance{Hub: fleet.HubRef{ID: r.HubID, Name: r.HubName, Zone: r.HubZone, Region: r.HubRegion}}
		}
		hubs[r.HubID].Add(state, r.N)
		if zones[r.HubZone] == nil {
			zones[r.HubZone] = &fleet.ZoneCompliance{Zone: r.HubZone}
		}
		zones[r.HubZone].Add(state, r.N)
	}
	for _, h := range hubs {
		sum.Hubs = append(sum.Hubs, *h)
	}
	for _, z := range zones {
		sum.Zones = append(sum.Zones, *z)
	}
	sort.Slice(sum.Hubs, func(i, j int) bool { return sum.Hubs[i].Hub.Name < sum.Hubs[j].Hub.Name })
	sort.Slice(sum.Zones, func(i, j int) bool { return sum.Zones[i].Zone < sum.Zones[j].Zone })
	return sum, nil
}
