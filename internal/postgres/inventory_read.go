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
	Labels            []byte // the JSON documents (labels jsonb, the others json), read as text and passed on undecoded
	Claims            []byte
	Capacity          []byte
	Allocatable       []byte
	Conditions        []byte
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
// clusters are visible to the org of their registration; admins see all. The
// feed's cursor, the total and the page are read in one round trip; a second
// counts the rows when the counters do not hold the search's label.
// It is a heavy read: a fresh read replica serves it when one is configured.
func (s *InventoryStore) ListManagedClusters(ctx context.Context, caller fleet.Identity, admin bool, q fleet.ListQuery) (fleet.ManagedClusterPage, error) {
	var page fleet.ManagedClusterPage
	err := s.heavyRead(ctx, readInventoryList, func(db *DB) (err error) {
		page, err = s.listManagedClusters(db.Gorm.WithContext(ctx), caller, admin, q)
		return err
	})
	if err != nil {
		return fleet.ManagedClusterPage{}, fmt.Errorf("ListManagedClusters(%s): %w", caller.OrgID, err)
	}
	return page, nil
}

// listManagedClusters reads the page on db, a pool's handle with the request's context.
func (s *InventoryStore) listManagedClusters(db *gorm.DB, caller fleet.Identity, admin bool, q fleet.ListQuery) (fleet.ManagedClusterPage, error) {
	var out fleet.ManagedClusterPage
	page, size, err := s.pageBounds(q)
	if err != nil {
		return out, err
	}
	expr, conds, err := searchConditions(managedClusterList, q)
	if err != nil {
		return out, err
	}
	order, err := listOrder(managedClusterList, q)
	if err != nil {
		return out, err
	}
	// An organisation's list is read from its hubs and registrations
	// (inventory_org.go); an admin's, and a caller's of no organisation
	// (who sees nothing), from the whole inventory.
	var query, pageQuery *gorm.DB
	if !admin && caller.OrgID != "" {
		query, pageQuery = s.orgClusters(db, caller.OrgID, conds, order, 0), s.orgClusters(db, caller.OrgID, conds, order, page*size)
	} else {
		query = conds.apply(s.visibleManagedClustersOn(db, caller, admin))
		pageQuery = query
	}
	total, err := s.managedClusterTotal(caller.OrgID, admin, expr, conds, query)
	if err != nil {
		return out, err
	}
	rows := make([]managedClusterRow, 0, size)
	list, err := built(paged(pageQuery, managedClusterList, order, page, size),
		func(tx *gorm.DB) *gorm.DB { return tx.Find(&rows) }, readRows(&rows))
	if err != nil {
		return out, err
	}
	// An admin's page without a search has only the zones and the paging for
	// values: its plan is the same for all of them.
	list.generic = admin && expr == nil
	var bound boundRow
	stmts := append(append([]statement{bound.statement()}, total.stmts...), list)
	// With a read replica, the WAL position is read after the list's
	// snapshot, so the cursor asks the replica for all the list showed
	// (changePosition.LSN).
	var lsn uint64
	if s.replicated() {
		stmts = append(stmts, statement{sql: walPositionSQL, generic: true, read: readOne(&lsn)})
	}
	if err := roundTrip(db, stmts...); err != nil {
		return out, err
	}
	n, err := total.total()
	if err != nil {
		return out, err
	}
	xid, err := bound.bound()
	if err != nil {
		return out, err
	}
	out.Total, out.Cursor = int(n), changePosition{Xid: xid, LSN: lsn}.cursor()
	out.Items = make([]fleet.ManagedCluster, len(rows))
	for i, r := range rows {
		out.Items[i] = r.toManagedCluster()
	}
	return out, nil
}

// GetManagedCluster returns one live cluster the caller may see.
func (s *InventoryStore) GetManagedCluster(ctx context.Context, caller fleet.Identity, admin bool, id string) (fleet.ManagedCluster, error) {
	rows, err := find[managedClusterRow](s.visibleManagedClusters(ctx, caller, admin).Where("mc.id = ?", id).Limit(1), 1)
	if err == nil && len(rows) == 0 {
		err = notFound("managed cluster", id)
	}
	if err != nil {
		return fleet.ManagedCluster{}, fmt.Errorf("GetManagedCluster(%s/%s): %w", caller.OrgID, id, err)
	}
	return rows[0].toManagedCluster(), nil
}

// managedClusterColumns are the columns of a managedClusterRow, each with
// its field: those of a managed_clusters row mc and of its hub h.
var managedClusterColumns = newColumns([]column[managedClusterRow]{
	{"mc.id", func(r *managedClusterRow) any { return &r.ID }},
	{"mc.hub_id", func(r *managedClusterRow) any { return &r.HubID }},
	{"mc.name", func(r *managedClusterRow) any { return &r.Name }},
	{"mc.uid", func(r *managedClusterRow) any { return &r.UID }},
	{"mc.registration_id", func(r *managedClusterRow) any { return &r.RegistrationID }},
	{"mc.cluster_id", func(r *managedClusterRow) any { return &r.ClusterID }},
	{"mc.labels", func(r *managedClusterRow) any { return &r.Labels }},
	{"mc.claims", func(r *managedClusterRow) any { return &r.Claims }},
	{"mc.capacity", func(r *managedClusterRow) any { return &r.Capacity }},
	{"mc.allocatable", func(r *managedClusterRow) any { return &r.Allocatable }},
	{"mc.conditions", func(r *managedClusterRow) any { return &r.Conditions }},
	{"mc.kubernetes_version", func(r *managedClusterRow) any { return &r.KubernetesVersion }},
	{"mc.openshift_version", func(r *managedClusterRow) any { return &r.OpenshiftVersion }},
	{"mc.platform", func(r *managedClusterRow) any { return &r.Platform }},
	{"mc.product", func(r *managedClusterRow) any { return &r.Product }},
	{"mc.region", func(r *managedClusterRow) any { return &r.Region }},
	{"mc.console_url", func(r *managedClusterRow) any { return &r.ConsoleURL }},
	{"mc.joined", func(r *managedClusterRow) any { return &r.Joined }},
	{"mc.available", func(r *managedClusterRow) any { return &r.Available }},
	{"mc.created_at", func(r *managedClusterRow) any { return &r.CreatedAt }},
	{"mc.updated_at", func(r *managedClusterRow) any { return &r.UpdatedAt }},
	{"h.name AS hub_name", func(r *managedClusterRow) any { return &r.HubName }},
	{"h.zone AS hub_zone", func(r *managedClusterRow) any { return &r.HubZone }},
	{"h.region AS hub_region", func(r *managedClusterRow) any { return &r.HubRegion }},
	{"h.inventory_stale AS stale", func(r *managedClusterRow) any { return &r.Stale }},
	{"greatest(mc.updated_at, coalesce(h.last_inventory_at, mc.updated_at)) AS last_seen_at",
		func(r *managedClusterRow) any { return &r.LastSeenAt }},
}...)

func (r *managedClusterRow) fields() []any { return managedClusterColumns.fields(r) }

// visibleManagedClusters selects the live clusters of live hubs in the
// served zones that the caller may see, with their hubs.
func (s *InventoryStore) visibleManagedClusters(ctx context.Context, caller fleet.Identity, admin bool) *gorm.DB {
	return s.visibleManagedClustersOn(s.db.Gorm.WithContext(ctx), caller, admin)
}

// visibleManagedClustersOn is visibleManagedClusters read on db.
func (s *InventoryStore) visibleManagedClustersOn(db *gorm.DB, caller fleet.Identity, admin bool) *gorm.DB {
	query := db.Table("managed_clusters AS mc").Select(managedClusterColumns.sql).
		Joins("JOIN hubs h ON h.id = mc.hub_id").
		Joins("LEFT JOIN registrations r ON r.id = mc.registration_id").
		Where("mc.deleted_at IS NULL AND h.deleted_at IS NULL")
	query = s.inServedZones(query, "h.zone")
	if !admin {
		query = visibleTo(query, caller.OrgID)
	}
	return query
}

// visibleTo scopes the inventory to an organisation.
func visibleTo(q *gorm.DB, org string) *gorm.DB {
	if org == "" {
		return q.Where("false")
	}
	return q.Where("(h.owner_org_id = ? OR (h.owner_org_id IS NULL AND r.org_id = ?))", org, org)
}
