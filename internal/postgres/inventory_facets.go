package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
)

// clusterTotal reads the total of a list of the inventory in the list's
// round trip. From counters kept by triggers instead of counting the rows,
// when it can: unfiltered, from managed_cluster_counts (live clusters per
// hub); a search that is exactly one `region = 'v'`, or one `labels.k = 'v'`
// of a counted label, from managed_cluster_facet_counts (live clusters per
// hub of each value). An admin's total is the sum over the live hubs of the
// served zones; an organisation's, the sum over those it owns plus the count,
// through its registrations, of its matching clusters on shared hubs. Either
// is exact, the number a count of the list's rows gives. Any other search,
// or a label not counted, counts the rows.
type clusterTotal struct {
	stmts []statement
	// rows is the list's query, counted when the counters do not hold the
	// search's facet.
	rows           *gorm.DB
	owned, shared  int64
	counted, empty bool
}

// managedClusterTotal plans the total of rows, the inventory org (or an
// admin) sees filtered by expr.
func (s *InventoryStore) managedClusterTotal(org string, admin bool, expr fleet.SearchExpr, conds conditions, rows *gorm.DB) (*clusterTotal, error) {
	t := &clusterTotal{rows: rows}
	if !admin && org == "" {
		t.empty = true
		return t, nil
	}
	// Built on rows' pool: the primary's or the read replica's.
	db := rows.Session(&gorm.Session{NewDB: true})
	var owned *gorm.DB
	// counted says whether the counters hold the search's facet: a label's
	// only when its key is in --inventory-counted-labels, read in the same
	// statement as the sum.
	counted, countedArgs := "true", []any{}
	if expr == nil {
		owned = db.Table("managed_cluster_counts AS c")
	} else {
		facet, value, ok := countedFacet(expr)
		if !ok {
			count, err := built(rows.Session(&gorm.Session{}), func(tx *gorm.DB) *gorm.DB { return tx.Count(new(int64)) },
				readOne(&t.owned))
			t.stmts, t.counted = []statement{count}, true
			return t, err
		}
		if key, isLabel := strings.CutPrefix(facet, "labels."); isLabel {
			counted, countedArgs = "EXISTS (SELECT 1 FROM inventory_counted_labels WHERE key = ?)", []any{key}
		}
		owned = db.Table("managed_cluster_facet_counts AS c").Where("c.facet = ? AND c.value = ?", facet, value)
	}
	owned = s.inServedZones(owned.Joins("JOIN hubs h ON h.id = c.hub_id").Where("h.deleted_at IS NULL"), "h.zone")
	if !admin {
		owned = owned.Where("h.owner_org_id = ?", org)
	}
	// The sum's values are the zones, the organisation and the facet, which
	// choose nothing in its plan over small tables: planned once.
	sum, err := built(owned.Select("coalesce(sum(c.live), 0) AS total, "+counted+" AS counted", countedArgs...),
		func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]countedSum{}) }, readOne(&t.owned, &t.counted))
	sum.generic = true
	t.stmts = []statement{sum}
	if err != nil || admin {
		return t, err
	}
	count, err := built(s.orgShared(db, org, conds, "", 0), func(tx *gorm.DB) *gorm.DB { return tx.Count(new(int64)) }, readOne(&t.shared))
	t.stmts = append(t.stmts, count)
	return t, err
}

// countedSum is the row of a clusterTotal's sum (only its shape is used: GORM
// builds the statement, roundTrip reads it).
type countedSum struct {
	Total   int64
	Counted bool
}

// total is the total, once the round trip has run t.stmts: counted by a
// statement of its own when the counters did not hold the search's label.
func (t *clusterTotal) total() (int64, error) {
	switch {
	case t.empty:
		return 0, nil
	case t.counted:
		return t.owned + t.shared, nil
	}
	var n int64
	err := t.rows.Session(&gorm.Session{}).Count(&n).Error
	return n, err
}

// countedFacet returns the facet and value of a search that is one equality
// with a string on the region or on a label: ("region", v) or
// ("labels.<key>", v), as managed_cluster_facet_counts names them.
func countedFacet(expr fleet.SearchExpr) (facet, value string, ok bool) {
	p, isPredicate := expr.(fleet.SearchPredicate)
	if !isPredicate || p.Op != fleet.OpEq || len(p.Values) != 1 || p.Values[0].Kind != fleet.ValueString {
		return "", "", false
	}
	switch {
	case p.Field == "region" && p.Key == "":
		return "region", p.Values[0].Text, true
	case p.Field == "labels" && p.Key != "":
		return "labels." + p.Key, p.Values[0].Text, true
	}
	return "", "", false
}

// SyncCountedLabels makes keys the labels whose values the inventory counts
// per hub, and the registrations per organisation and zone
// (--inventory-counted-labels), for the totals of label searches. When the
// set changes it counts the added keys' values over the live inventory and
// registrations and drops the removed keys' counts, holding a SHARE ROW
// EXCLUSIVE lock on managed_clusters and registrations so that no write goes
// uncounted: ingests and registration writes wait for it, reads do not. The lock also excludes itself, so replicas
// started together with a new set change it one after the other, and the
// later ones find it done; a key some other writer added meanwhile is left
// as that writer counted it. With the set unchanged it reads one small table.
func (s *InventoryStore) SyncCountedLabels(ctx context.Context, keys []string) error {
	want := slices.Sorted(slices.Values(keys))
	want = slices.Compact(want)
	err := s.transact(ctx, func(tx *gorm.DB) error {
		have, err := countedLabels(tx)
		if err != nil || slices.Equal(have, want) {
			return err
		}
		if err := tx.Exec(`LOCK TABLE managed_clusters, registrations IN SHARE ROW EXCLUSIVE MODE`).Error; err != nil {
			return err
		}
		if have, err = countedLabels(tx); err != nil || slices.Equal(have, want) {
			return err
		}
		added, removed := []string{}, []string{}
		for _, k := range want {
			if !slices.Contains(have, k) {
				added = append(added, k)
			}
		}
		for _, k := range have {
			if !slices.Contains(want, k) {
				removed = append(removed, k)
			}
		}
		if err := tx.Exec(`
WITH gone AS (DELETE FROM inventory_counted_labels WHERE key IN (SELECT jsonb_array_elements_text(?::jsonb))),
	dropped AS (DELETE FROM managed_cluster_facet_counts WHERE facet LIKE 'labels.%' AND substr(facet, 8) IN (SELECT jsonb_array_elements_text(?::jsonb))),
	added AS (INSERT INTO inventory_counted_labels (key) SELECT jsonb_array_elements_text(?::jsonb)
		ON CONFLICT (key) DO NOTHING RETURNING key)
INSERT INTO managed_cluster_facet_counts (facet, value, hub_id, live)
	SELECT 'labels.' || l.key, l.value, mc.hub_id, count(*)
	FROM managed_clusters mc CROSS JOIN LATERAL jsonb_each_text(mc.labels) AS l
	WHERE mc.deleted_at IS NULL AND l.key IN (SELECT key FROM added)
	GROUP BY l.key, l.value, mc.hub_id`, jsonText(removed), jsonText(removed), jsonText(added)).Error; err != nil {
			return err
		}
		return tx.Exec(`
WITH dropped AS (DELETE FROM registration_label_counts WHERE key IN (SELECT jsonb_array_elements_text(?::jsonb)))
INSERT INTO registration_label_counts (org_id, key, value, zone, shard, live)
	SELECT org_id, key, value, zone, shard, sum(d) FROM (`+migrations.LabelCountedRows("registrations", "1")+`) AS counted
	WHERE key IN (SELECT jsonb_array_elements_text(?::jsonb))
	GROUP BY 1, 2, 3, 4, 5`, jsonText(removed), jsonText(added)).Error
	})
	if err != nil {
		return fmt.Errorf("SyncCountedLabels(%v): %w", want, err)
	}
	return nil
}

// countedLabels reads the counted label keys, sorted.
func countedLabels(tx *gorm.DB) ([]string, error) {
	var keys []string
	err := tx.Raw(`SELECT key FROM inventory_counted_labels ORDER BY key`).Scan(&keys).Error
	return keys, err
}
