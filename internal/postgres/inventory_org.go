package postgres

import (
	"gorm.io/gorm"
)

// An organisation's inventory is read from what it holds rather than by
// walking everyone's clusters in the list's order and keeping its own: that
// walk grows with the fleet, the more so the fewer clusters the organisation
// has (docs/performance.md). An organisation sees the clusters of the hubs it
// owns and, on shared hubs (without an owner), those of its registrations
// (visibleTo); the two are disjoint, so its list is their union:
//
//   - orgOwned: for each hub it owns, that hub's clusters in the list's order
//     (managed_clusters_live serves the default order within a hub);
//   - orgShared: for each of its registrations, the clusters linked to it
//     (managed_clusters_registration_change), on shared hubs only.
//
// Each side selects gorm.Expr("mc.*"): a plain Select("mc.*") would be quoted
// as the column "*" of mc. A page takes the first offset+size rows of each in the list's order, then
// that page of their union; a count counts both whole.

// orgOwned is the clusters of the live hubs of the served zones that org
// owns, filtered by conds; with limit > 0, each hub's first limit in order
// (then tiebreak).
func (s *InventoryStore) orgOwned(db *gorm.DB, org string, conds conditions, order string, limit int) *gorm.DB {
	inner := conds.apply(db.Table("managed_clusters AS mc").Select("?", gorm.Expr("mc.*")).Where("mc.hub_id = h.id AND mc.deleted_at IS NULL"))
	if limit > 0 {
		inner = inner.Order(order + ", " + managedClusterList.tiebreak).Limit(limit)
	}
	return s.inServedZones(db.Table("hubs AS h").Joins("CROSS JOIN LATERAL (?) AS mc", inner).Select("?", gorm.Expr("mc.*")).
		Where("h.owner_org_id = ? AND h.deleted_at IS NULL", org), "h.zone")
}

// orgShared is the clusters linked to org's registrations (deleted ones
// included: their clusters stay the organisation's) on the live shared hubs
// of the served zones, filtered by conds; with limit > 0, the first limit in
// order (then tiebreak). The registrations are read first and each one's
// clusters looked up (OFFSET 0 keeps PostgreSQL from flattening either
// subquery), so the cost is the organisation's: as a join, PostgreSQL
// merged the organisation's registrations with the whole index of every
// registered cluster, which grows with the fleet (docs/performance.md).
func (s *InventoryStore) orgShared(db *gorm.DB, org string, conds conditions, order string, limit int) *gorm.DB {
	q := db.Table("(SELECT r.id FROM registrations r WHERE r.org_id = ? OFFSET 0) AS r", org).
		Joins("CROSS JOIN LATERAL (SELECT mc.* FROM managed_clusters mc WHERE mc.registration_id = r.id AND mc.deleted_at IS NULL OFFSET 0) AS mc").
		Joins("JOIN hubs h ON h.id = mc.hub_id AND h.owner_org_id IS NULL AND h.deleted_at IS NULL").Select("?", gorm.Expr("mc.*"))
	q = conds.apply(s.inServedZones(q, "h.zone"))
	if limit > 0 {
		q = q.Order(order + ", " + managedClusterList.tiebreak).Limit(limit)
	}
	return q
}

// orgClusters is the union of orgOwned and orgShared as managedClusterRows
// (managed_clusters mc with its hub h, managedClusterColumns); with limit >
// 0, each side holds only its first limit rows in order.
func (s *InventoryStore) orgClusters(db *gorm.DB, org string, conds conditions, order string, limit int) *gorm.DB {
	return db.Table("((?) UNION ALL (?)) AS mc", s.orgOwned(db, org, conds, order, limit), s.orgShared(db, org, conds, order, limit)).
		Joins("JOIN hubs h ON h.id = mc.hub_id").Select(managedClusterColumns.sql)
}
