package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300007InventoryReads makes the inventory's lists cheap at
// fleet scale (docs/performance.md, "Reads at fleet scale"): indexes for the
// orders and filters the lists use, and managed_cluster_counts, the live
// clusters per hub, kept by statement-level triggers so that the `total` of
// an unfiltered list is a sum over the hubs instead of a count of the rows.
// The triggers aggregate each statement's transition tables once, and write a
// hub's row only when its live count moved: an unchanged resync writes none.
func migration202611300007InventoryReads() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300007",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE INDEX managed_clusters_created ON managed_clusters (created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX managed_clusters_name ON managed_clusters (name, id) WHERE deleted_at IS NULL;
CREATE INDEX managed_clusters_region ON managed_clusters (region, created_at, id) WHERE deleted_at IS NULL;
CREATE TABLE managed_cluster_counts (
	hub_id text   PRIMARY KEY,
	live   bigint NOT NULL
);
INSERT INTO managed_cluster_counts (hub_id, live)
	SELECT hub_id, count(*) FROM managed_clusters WHERE deleted_at IS NULL GROUP BY hub_id;
-- Each statement's change of live rows per hub, from its transition tables.
-- Sorted by hub, so two statements touching several hubs lock their counts in
-- the same order; a hub whose count did not move is not written.
CREATE FUNCTION managed_cluster_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO managed_cluster_counts AS c (hub_id, live)
			SELECT hub_id, count(*) FROM new_rows WHERE deleted_at IS NULL GROUP BY hub_id ORDER BY hub_id
		ON CONFLICT (hub_id) DO UPDATE SET live = c.live + excluded.live;
	ELSIF TG_OP = 'UPDATE' THEN
		INSERT INTO managed_cluster_counts AS c (hub_id, live)
			SELECT hub_id, sum(d) FROM (
				SELECT hub_id, 1 AS d FROM new_rows WHERE deleted_at IS NULL
				UNION ALL
				SELECT hub_id, -1 FROM old_rows WHERE deleted_at IS NULL) AS moved
			GROUP BY hub_id HAVING sum(d) <> 0 ORDER BY hub_id
		ON CONFLICT (hub_id) DO UPDATE SET live = c.live + excluded.live;
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO managed_cluster_counts AS c (hub_id, live)
			SELECT hub_id, -count(*) FROM old_rows WHERE deleted_at IS NULL GROUP BY hub_id ORDER BY hub_id
		ON CONFLICT (hub_id) DO UPDATE SET live = c.live + excluded.live;
	ELSE -- TRUNCATE
		DELETE FROM managed_cluster_counts;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER managed_cluster_counts_insert AFTER INSERT ON managed_clusters
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_counts_apply();
CREATE TRIGGER managed_cluster_counts_update AFTER UPDATE ON managed_clusters
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_counts_apply();
CREATE TRIGGER managed_cluster_counts_delete AFTER DELETE ON managed_clusters
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_counts_apply();
CREATE TRIGGER managed_cluster_counts_truncate AFTER TRUNCATE ON managed_clusters
	FOR EACH STATEMENT EXECUTE FUNCTION managed_cluster_counts_apply();
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TRIGGER managed_cluster_counts_truncate ON managed_clusters;
DROP TRIGGER managed_cluster_counts_delete ON managed_clusters;
DROP TRIGGER managed_cluster_counts_update ON managed_clusters;
DROP TRIGGER managed_cluster_counts_insert ON managed_clusters;
DROP FUNCTION managed_cluster_counts_apply();
DROP TABLE managed_cluster_counts;
DROP INDEX managed_clusters_region;
DROP INDEX managed_clusters_name;
DROP INDEX managed_clusters_created;
`).Error
		},
	}
}
