package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// The user-facing metrics (docs/user-facing-metrics.md) read the clusters a
// caller may see under the inventory's visibility rule, and what the fleet
// manager knows of them. An organisation's clusters are read from its hubs
// and registrations (inventory_org.go), its compliance from its policies,
// its phases from the registration counters and its pools from its own
// rows: every read costs what the organisation holds, not the fleet.

// metricsClusterRow is a MetricsCluster as read: its registration's phase and
// organisation are NULL for a cluster without one.
type metricsClusterRow struct {
	ManagedClusterID  string
	Name              string
	ClusterID         string
	HubID             string
	RegistrationID    *string
	Phase             *string
	OrgID             *string
	Available         string
	Joined            string
	OpenshiftVersion  string
	KubernetesVersion string
	Platform          string
	Region            string
	Capacity          []byte
	Allocatable       []byte
	Stale             bool
}

// metricsClusterColumns selects a metricsClusterRow from a cluster mc, its
// hub h and its registration r (LEFT JOIN).
const metricsClusterColumns = `mc.id AS managed_cluster_id, mc.name, mc.cluster_id, mc.hub_id, mc.registration_id,
	r.phase, coalesce(r.org_id, h.owner_org_id) AS org_id, mc.available, mc.joined, mc.openshift_version,
	mc.kubernetes_version, mc.platform, mc.region, mc.capacity, mc.allocatable, h.inventory_stale AS stale`

func (r metricsClusterRow) toMetricsCluster() fleet.MetricsCluster {
	return fleet.MetricsCluster{ManagedClusterID: r.ManagedClusterID, Name: r.Name, ClusterID: r.ClusterID, HubID: r.HubID,
		RegistrationID: deref(r.RegistrationID), Phase: fleet.Phase(deref(r.Phase)), OrgID: deref(r.OrgID),
		Available: fleet.ConditionStatus(r.Available), Joined: fleet.ConditionStatus(r.Joined),
		OpenShiftVersion: r.OpenshiftVersion, KubernetesVersion: r.KubernetesVersion, Platform: r.Platform, Region: r.Region,
		Capacity: r.Capacity, Allocatable: r.Allocatable, Stale: r.Stale}
}

// MetricsClusters returns the live clusters of the scope in the order of
// their ids: the inventory's visibility rule, narrowed to one registration's
// clusters when the scope names one. Errors: CodeNotFound when the
// registration is not one the caller may see; CodeMetricsTooManyClusters
// past scope.Limit. A fresh read replica serves it when one is configured.
func (s *MetricsStore) MetricsClusters(ctx context.Context, scope fleet.MetricsScope) ([]fleet.MetricsCluster, error) {
	var out []fleet.MetricsCluster
	err := s.heavyRead(ctx, readUserMetrics, func(db *DB) (err error) {
		out, err = s.metricsClusters(db.Gorm.WithContext(ctx), scope)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("MetricsClusters(%s): %w", scope.Caller.OrgID, err)
	}
	return out, nil
}

// metricsClusters reads MetricsClusters on db, a pool's handle with the
// request's context.
func (s *MetricsStore) metricsClusters(db *gorm.DB, scope fleet.MetricsScope) ([]fleet.MetricsCluster, error) {
	org := scope.Caller.OrgID
	var query *gorm.DB
	switch {
	case scope.RegistrationID != "":
		if err := s.checkMetricsRegistration(db, scope); err != nil {
			return nil, err
		}
		query = s.inventory.visibleManagedClustersOn(db, scope.Caller, scope.Admin).Where("mc.registration_id = ?", scope.RegistrationID)
	case scope.Admin:
		query = s.inventory.visibleManagedClustersOn(db, scope.Caller, true)
	case org != "":
		query = s.inventory.orgClusters(db, org, nil, "", 0).Joins("LEFT JOIN registrations r ON r.id = mc.registration_id")
	default: // a caller of no organisation sees nothing
		return []fleet.MetricsCluster{}, nil
	}
	query = query.Select(metricsClusterColumns).Order("mc.id")
	if scope.Limit > 0 {
		query = query.Limit(scope.Limit + 1)
	}
	var rows []metricsClusterRow
	if err := query.Scan(&rows).Error; err != nil {
		return nil, err
	}
	if scope.Limit > 0 && len(rows) > scope.Limit {
		return nil, fleet.Errorf(fleet.CodeMetricsTooManyClusters, "the scope holds more than %d clusters", scope.Limit)
	}
	out := make([]fleet.MetricsCluster, len(rows))
	for i, r := range rows {
		out[i] = r.toMetricsCluster()
	}
	return out, markSharedIdentities(db, scope, out)
}

// checkMetricsRegistration answers not found unless the scope's registration
// is live, in a served zone, and the caller's organisation's (any for an
// admin). The answer names neither the id nor its organisation.
func (s *MetricsStore) checkMetricsRegistration(db *gorm.DB, scope fleet.MetricsScope) error {
	id := scope.RegistrationID
	if !scope.Admin && scope.Caller.OrgID == "" {
		return notFound("cluster", id)
	}
	q := s.inServedZones(db.Table("registrations AS r").Select("r.id").Where("r.id = ? AND r.deleted_at IS NULL", id), "r.zone")
	if !scope.Admin {
		q = q.Where("r.org_id = ?", scope.Caller.OrgID)
	}
	var found string
	err := q.Take(&found).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return notFound("cluster", id)
	}
	return err
}

// MetricsInventory returns MetricsClusters with their compliance and, for a
// scope wider than one registration, the phases of the registrations and
// the capacity pools of the caller's organisation (of every organisation
// for an admin). Errors: as MetricsClusters.
func (s *MetricsStore) MetricsInventory(ctx context.Context, scope fleet.MetricsScope) (fleet.MetricsInventory, error) {
	var out fleet.MetricsInventory
	err := s.heavyRead(ctx, readUserMetrics, func(db *DB) error {
		var err error
		out, err = s.metricsInventory(db.Gorm.WithContext(ctx), scope)
		return err
	})
	if err != nil {
		return fleet.MetricsInventory{}, fmt.Errorf("MetricsInventory(%s): %w", scope.Caller.OrgID, err)
	}
	return out, nil
}

func (s *MetricsStore) metricsInventory(db *gorm.DB, scope fleet.MetricsScope) (fleet.MetricsInventory, error) {
	out := fleet.MetricsInventory{Compliance: []fleet.PolicyComplianceState{}, Phases: []fleet.PhaseCount{}, Pools: []fleet.PoolUsage{}}
	var err error
	if out.Clusters, err = s.metricsClusters(db, scope); err != nil {
		return out, err
	}
	if out.Compliance, err = metricsCompliance(db, scope, out.Clusters); err != nil {
		return out, err
	}
	if scope.RegistrationID != "" || (!scope.Admin && scope.Caller.OrgID == "") {
		return out, nil
	}
	if out.Phases, err = s.metricsPhases(db, scope); err != nil {
		return out, err
	}
	if out.Pools, err = s.metricsPools(db, scope); err != nil {
		return out, err
	}
	return out, nil
}

// metricsCompliance is the compliance of clusters with the live policies of
// the scope (the caller's organisation's; every one for an admin), matched
// as the hubs report it: by hub and ManagedCluster name. An organisation's
// rows are read from its policies, so a cluster of a shared hub shows only
// its own organisation's policies.
func metricsCompliance(db *gorm.DB, scope fleet.MetricsScope, clusters []fleet.MetricsCluster) ([]fleet.PolicyComplianceState, error) {
	out := []fleet.PolicyComplianceState{}
	if len(clusters) == 0 {
		return out, nil
	}
	ids, hubs, names := make(textArray, len(clusters)), make(textArray, len(clusters)), make(textArray, len(clusters))
	for i, c := range clusters {
		ids[i], hubs[i], names[i] = c.ManagedClusterID, c.HubID, c.Name
	}
	// Arrays rather than a JSON document: PostgreSQL knows an array's
	// length when it plans, so that a few clusters are looked up in the
	// compliance's primary key and many are joined by hash.
	q := db.Table("unnest(?::text[], ?::text[], ?::text[]) AS k(id, hub_id, name)", ids, hubs, names).
		Joins("JOIN policy_compliance c ON c.hub_id = k.hub_id AND c.cluster_name = k.name").
		Joins("JOIN policies p ON p.id = c.policy_id AND p.deleted_at IS NULL").
		Select("k.id AS managed_cluster_id, p.id AS policy_id, p.name AS policy_name, c.state").Order("k.id, p.id")
	if !scope.Admin {
		q = q.Where("p.org_id = ?", scope.Caller.OrgID)
	}
	return out, q.Scan(&out).Error
}

// metricsPhases counts the live registrations of the caller's organisation
// (of every organisation for an admin) in the served zones per phase, summed
// from the counters of migration202612011800RegistrationCounts.
func (s *MetricsStore) metricsPhases(db *gorm.DB, scope fleet.MetricsScope) ([]fleet.PhaseCount, error) {
	out := []fleet.PhaseCount{}
	q := s.inServedZones(db.Table("registration_counts AS c"), "c.zone").
		Select("c.org_id, c.phase, sum(c.live) AS count").Group("c.org_id, c.phase").Having("sum(c.live) <> 0").Order("c.org_id, c.phase")
	if !scope.Admin {
		q = q.Where("c.org_id = ?", scope.Caller.OrgID)
	}
	return out, q.Scan(&out).Error
}

// metricsPools is the size and use of the live capacity pools of the
// caller's organisation (of every organisation for an admin) in the served
// zones: their clusters not being removed, and those clusters' units.
func (s *MetricsStore) metricsPools(db *gorm.DB, scope fleet.MetricsScope) ([]fleet.PoolUsage, error) {
	out := []fleet.PoolUsage{}
	q := s.inServedZones(db.Table("capacity_pools AS p").
		Joins("LEFT JOIN pool_clusters pc ON pc.pool_id = p.id AND NOT pc.removing").
		Where("p.deleted_at IS NULL"), "p.zone").
		Select(`p.id AS pool_id, p.name AS pool_name, p.org_id, count(pc.registration_id) AS clusters,
	coalesce(sum(pc.capacity_units), 0) AS capacity_units, coalesce(sum(pc.reserved_units), 0) AS reserved_units`).
		Group("p.id").Order("p.org_id, p.name, p.id")
	if !scope.Admin {
		q = q.Where("p.org_id = ?", scope.Caller.OrgID)
	}
	return out, q.Scan(&out).Error
}

// textArray is a text[] parameter, written as an array literal: GORM would
// expand a []string into a list of parameters.
type textArray []string

// Value implements driver.Valuer.
func (a textArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, r := range v {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), nil
}
