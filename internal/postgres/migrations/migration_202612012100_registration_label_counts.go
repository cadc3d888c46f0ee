package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612012100RegistrationLabelCounts keeps, next to
// registration_counts, the live registrations per organisation, zone and
// value of each counted label (the keys of inventory_counted_labels,
// --inventory-counted-labels, which the inventory counts too), so that the
// total of a search by one such label is a sum over a few counter rows, like
// the inventory's. A search by a label value most registrations hold would
// otherwise count most of the organisation's rows. The trigger function of
// migration202612011800RegistrationCounts is replaced by one that also writes
// these counters; Store.SyncCountedLabels counts a key added to the set.
func migration202612012100RegistrationLabelCounts() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612012100",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE registration_label_counts (
	org_id text     NOT NULL,
	key    text     NOT NULL,
	value  text     NOT NULL,
	zone   text     NOT NULL,
	shard  smallint NOT NULL,
	live   bigint   NOT NULL,
	PRIMARY KEY (org_id, key, value, zone, shard)
);
INSERT INTO registration_label_counts (org_id, key, value, zone, shard, live)
	SELECT org_id, key, value, zone, shard, sum(d) FROM (` + labelCountedRows("registrations", "1") + `) AS moved
	GROUP BY 1, 2, 3, 4, 5;
CREATE OR REPLACE FUNCTION registration_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		` + applyLabelCounts(countedRows("new_rows", "1"), labelCountedRows("new_rows", "1")) + `;
	ELSIF TG_OP = 'UPDATE' THEN
		` + applyLabelCounts(countedRows("new_rows", "1")+" UNION ALL "+countedRows("old_rows", "-1"),
				labelCountedRows("new_rows", "1")+" UNION ALL "+labelCountedRows("old_rows", "-1")) + `;
	ELSIF TG_OP = 'DELETE' THEN
		` + applyLabelCounts(countedRows("old_rows", "-1"), labelCountedRows("old_rows", "-1")) + `;
	ELSE -- TRUNCATE
		DELETE FROM registration_counts;
		DELETE FROM registration_phase_counts;
		DELETE FROM registration_label_counts;
	END IF;
	RETURN NULL;
END $$;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE OR REPLACE FUNCTION registration_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		` + applyCounts(countedRows("new_rows", "1")) + `;
	ELSIF TG_OP = 'UPDATE' THEN
		` + applyCounts(countedRows("new_rows", "1")+" UNION ALL "+countedRows("old_rows", "-1")) + `;
	ELSIF TG_OP = 'DELETE' THEN
		` + applyCounts(countedRows("old_rows", "-1")) + `;
	ELSE -- TRUNCATE
		DELETE FROM registration_counts;
		DELETE FROM registration_phase_counts;
	END IF;
	RETURN NULL;
END $$;
DROP TABLE registration_label_counts;
`).Error
		},
	}
}

// labelCountedRows selects the counted labels of the live rows of a
// transition table (or of registrations) as counter deltas.
func labelCountedRows(table, sign string) string {
	return `SELECT t.org_id, l.key, l.value, t.zone, ` + registrationShard("t") + ` AS shard, ` + sign + `::bigint AS d
		FROM ` + table + ` t CROSS JOIN LATERAL jsonb_each_text(t.labels) AS l
		JOIN inventory_counted_labels k ON k.key = l.key WHERE t.deleted_at IS NULL`
}

// applyLabelCounts is applyCounts with the label counters: the deltas moved
// and labels select added to the three counter tables, each in key order and
// only where the sum moved.
func applyLabelCounts(moved, labels string) string {
	return `WITH moved (org_id, zone, phase, shard, d) AS (` + moved + `),
		labels (org_id, key, value, zone, shard, d) AS (` + labels + `),
		per_org AS (
			INSERT INTO registration_counts AS c (org_id, zone, phase, shard, live)
			SELECT org_id, zone, phase, shard, sum(d) FROM moved
			GROUP BY org_id, zone, phase, shard HAVING sum(d) <> 0 ORDER BY org_id, zone, phase, shard
			ON CONFLICT (org_id, zone, phase, shard) DO UPDATE SET live = c.live + excluded.live),
		per_label AS (
			INSERT INTO registration_label_counts AS c (org_id, key, value, zone, shard, live)
			SELECT org_id, key, value, zone, shard, sum(d) FROM labels
			GROUP BY org_id, key, value, zone, shard HAVING sum(d) <> 0 ORDER BY org_id, key, value, zone, shard
			ON CONFLICT (org_id, key, value, zone, shard) DO UPDATE SET live = c.live + excluded.live)
		INSERT INTO registration_phase_counts AS c (phase, shard, live)
		SELECT phase, shard, sum(d) FROM moved
		GROUP BY phase, shard HAVING sum(d) <> 0 ORDER BY phase, shard
		ON CONFLICT (phase, shard) DO UPDATE SET live = c.live + excluded.live`
}
