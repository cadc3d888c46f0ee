package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300011InventoryFacets keeps the live clusters per hub of
// each region and of each value of the counted labels
// (inventory_counted_labels, set from --inventory-counted-labels by
// Store.SyncCountedLabels), so that the `total` of a search by one region or
// one counted label is a sum over the hubs, not a count of the matching rows
// (docs/performance.md, "Reads at fleet scale"). Like managed_cluster_counts,
// statement-level triggers aggregate each statement's transition tables once
// and write a (facet, value, hub) only when its count moved.
func migration202611300011InventoryFacets() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300011",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE inventory_counted_labels (
	key text PRIMARY KEY
);
CREATE TABLE managed_cluster_facet_counts (
	facet  text   NOT NULL,
	value  text   NOT NULL,
	hub_id text   NOT NULL,
	live   bigint NOT NULL,
	PRIMARY KEY (facet, value, hub_id)
);
INSERT INTO managed_cluster_facet_counts (facet, value, hub_id, live)
	SELECT 'region', region, hub_id, count(*) FROM managed_clusters WHERE deleted_at IS NULL GROUP BY region, hub_id;
CREATE FUNCTION managed_cluster_facets_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO managed_cluster_facet_counts AS c (facet, value, hub_id, live)
			SELECT facet, value, hub_id, sum(d) FROM (` + facetRows("new_rows", "1") + `) AS moved
			GROUP BY facet, value, hub_id ORDER BY facet, value, hub_id
		ON CONFLICT (facet, value, hub_id) DO UPDATE SET live = c.live + excluded.live;
	ELSIF TG_OP = 'UPDATE' THEN
		INSERT INTO managed_cluster_facet_counts AS c (facet, value, hub_id, live)
			SELECT facet, value, hub_id, sum(d) FROM (` + facetRows("new_rows", "1") + `
				UNION ALL ` + facetRows("old_rows", "-1") + `) AS moved
			GROUP BY facet, value, hub_id HAVING sum(d) <> 0 ORDER BY facet, value, hub_id
		ON CONFLICT (facet, value, hub_id) DO UPDATE SET live = c.live + excluded.live;
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO managed_cluster_facet_counts AS c (facet, value, hub_id, live)
			SELECT facet, value, hub_id, sum(d) FROM (` + facetRows("old_rows", "-1") + `) AS moved
			GROUP BY facet, value, hub_id ORDER BY facet, value, hub_id
		ON CONFLICT (facet, value, hub_id) DO UPDATE SET live = c.live + excluded.live;
	ELSE -- TRUNCATE
		DELETE FROM managed_cluster_facet_counts;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER managed_cluster_facets_insert AFTER INSERT ON managed_clusters
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_facets_apply();
CREATE TRIGGER managed_cluster_facets_update AFTER UPDATE ON managed_clusters
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_facets_apply();
CREATE TRIGGER managed_cluster_facets_delete AFTER DELETE ON managed_clusters
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_facets_apply();
CREATE TRIGGER managed_cluster_facets_truncate AFTER TRUNCATE ON managed_clusters
	FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_facets_apply();
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TRIGGER managed_cluster_facets_truncate ON managed_clusters;
DROP TRIGGER managed_cluster_facets_delete ON managed_clusters;
DROP TRIGGER managed_cluster_facets_update ON managed_clusters;
DROP TRIGGER managed_cluster_facets_insert ON managed_clusters;
DROP FUNCTION managed_cluster_facets_apply();
DROP TABLE managed_cluster_facet_counts;
DROP TABLE inventory_counted_labels;
`).Error
		},
	}
}

// facetRows selects the facets of a transition table's live rows, each with
// the weight sign: its region, and each counted label as "labels.<key>".
func facetRows(table, sign string) string {
	return `SELECT 'region' AS facet, t.region AS value, t.hub_id, ` + sign + ` AS d FROM ` + table + ` t
				WHERE t.deleted_at IS NULL
				UNION ALL
				SELECT 'labels.' || l.key, l.value, t.hub_id, ` + sign + ` FROM ` + table + ` t
				CROSS JOIN LATERAL jsonb_each_text(t.labels) AS l
				JOIN inventory_counted_labels k ON k.key = l.key
				WHERE t.deleted_at IS NULL`
}
