package postgres

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// managedClusterRow is a live inventory row with its hub and the visibility facts.
type managedClusterRow struct {
	ID                string
	HubID             string
	Name              string
	UID               string
	RegistrationID    *string
	ClusterID         string
	Labels            map[string]string        `gorm:"serializer:json"`
	Claims            map[string]string        `gorm:"serializer:json"`
	Capacity          map[string]string        `gorm:"serializer:json"`
	Allocatable       map[string]string        `gorm:"serializer:json"`
	Conditions        []fleet.ClusterCondition `gorm:"serializer:json"`
	KubernetesVersion string
	OpenshiftVersion  string
	Platform          string
	Product           string
	Region            string
	ConsoleURL        string
	Joined            string
	Available         string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	HubName           string
	HubZone           string
	HubRegion         string
	Stale             bool
	LastSeenAt        time.Time
}

func (r managedClusterRow) toManagedCluster() fleet.ManagedCluster {
	return fleet.ManagedCluster{
		ID: r.ID, Hub: fleet.HubRef{ID: r.HubID, Name: r.HubName, Zone: r.HubZone, Region: r.HubRegion}, Name: r.Name,
		UID: r.UID, ClusterID: r.ClusterID, RegistrationID: deref(r.RegistrationID), Labels: r.Labels, Claims: r.Claims,
		Capacity: r.Capacity, Allocatable: r.Allocatable, Conditions: r.Conditions, KubernetesVersion: r.KubernetesVersion,
		OpenShiftVersion: r.OpenshiftVersion, Platform: r.Platform, Product: r.Product, Region: r.Region, ConsoleURL: r.ConsoleURL,
		Joined: fleet.ConditionStatus(r.Joined), Available: fleet.ConditionStatus(r.Available), Stale: r.Stale,
		LastSeenAt: r.LastSeenAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

var managedClusterList = listSpec{
	search: SearchSchema{
		"id": {Column: "mc.id", Type: FieldText}, "name": {Column: "mc.name", Type: FieldText},
		"cluster_id": {Column: "mc.cluster_id", Type: FieldText}, "hub_id": {Column: "mc.hub_id", Type: FieldText},
		"hub_name": {Column: "h.name", Type: FieldText}, "zone": {Column: "h.zone", Type: FieldText},
		"region": {Column: "mc.region", Type: FieldText}, "platform": {Column: "mc.platform", Type: FieldText},
		"product": {Column: "mc.product", Type: FieldText}, "openshift_version": {Column: "mc.openshift_version", Type: FieldText},
		"kubernetes_version": {Column: "mc.kubernetes_version", Type: FieldText}, "joined": {Column: "mc.joined", Type: FieldText},
		"available": {Column: "mc.available", Type: FieldText}, "registration_id": {Column: "mc.registration_id", Type: FieldText},
		"labels": {Column: "mc.labels", Type: FieldLabels}, "stale": {Column: "h.inventory_stale", Type: FieldBool},
		"created_at": {Column: "mc.created_at", Type: FieldTimestamp}, "updated_at": {Column: "mc.updated_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{
		"name": "mc.name", "hub_name": "h.name", "region": "mc.region", "openshift_version": "mc.openshift_version",
		"created_at": "mc.created_at", "updated_at": "mc.updated_at",
	},
	tiebreak:     "mc.id",
	defaultOrder: "mc.created_at",
}

// ListManagedClusters returns a page of the inventory the caller may see: a
// customer-managed hub's clusters are its owner org's; a shared hub's
// clusters are visible to the org of their registration; admins see all.
func (s *Store) ListManagedClusters(ctx context.Context, caller fleet.Identity, admin bool, q fleet.ListQuery) ([]fleet.ManagedCluster, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	query := s.db.Gorm.WithContext(ctx).Table("managed_clusters AS mc").
		Select(`mc.*, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region, h.inventory_stale AS stale,
	greatest(mc.updated_at, coalesce(h.last_inventory_at, mc.updated_at)) AS last_seen_at`).
		Joins("JOIN hubs h ON h.id = mc.hub_id").
		Joins("LEFT JOIN registrations r ON r.id = mc.registration_id").
		Where("mc.deleted_at IS NULL AND h.deleted_at IS NULL")
	query = s.inServedZones(query, "h.zone")
	if !admin {
		query = visibleTo(query, caller.OrgID)
	}
	countAll := func() (int64, error) { return s.countManagedClusters(ctx, caller.OrgID, admin) }
	rows, total, err := listCounted[managedClusterRow](query, managedClusterList, q, page, size, countAll)
	if err != nil {
		return nil, 0, fmt.Errorf("ListManagedClusters(%s): %w", caller.OrgID, err)
	}
	out := make([]fleet.ManagedCluster, len(rows))
	for i, r := range rows {
		out[i] = r.toManagedCluster()
	}
	return out, total, nil
}

// countManagedClusters is the total of an unfiltered list, read from
// managed_cluster_counts (live clusters per hub, kept by triggers) instead of
// counting the rows: the sum over the live hubs of the served zones for an
// admin; for an organisation, the sum over those it owns plus the count,
// through its registrations, of its clusters on shared hubs. It is exact, the
// same number a count of the list's rows gives.
func (s *Store) countManagedClusters(ctx context.Context, org string, admin bool) (int64, error) {
	if !admin && org == "" {
		return 0, nil
	}
	db := s.db.Gorm.WithContext(ctx)
	hubs := s.inServedZones(db.Table("managed_cluster_counts AS c").Joins("JOIN hubs h ON h.id = c.hub_id").
		Where("h.deleted_at IS NULL"), "h.zone")
	if !admin {
		hubs = hubs.Where("h.owner_org_id = ?", org)
	}
	var owned int64
	if err := hubs.Select("coalesce(sum(c.live), 0)").Scan(&owned).Error; err != nil || admin {
		return owned, err
	}
	var shared int64
	err := s.inServedZones(db.Table("registrations AS r").
		Joins("JOIN managed_clusters mc ON mc.registration_id = r.id AND mc.deleted_at IS NULL").
		Joins("JOIN hubs h ON h.id = mc.hub_id AND h.deleted_at IS NULL AND h.owner_org_id IS NULL"), "h.zone").
		Where("r.org_id = ?", org).Count(&shared).Error
	return owned + shared, err
}

// visibleTo scopes the inventory to an organisation.
func visibleTo(q *gorm.DB, org string) *gorm.DB {
	if org == "" {
		return q.Where("false")
	}
	return q.Where("(h.owner_org_id = ? OR (h.owner_org_id IS NULL AND r.org_id = ?))", org, org)
}
