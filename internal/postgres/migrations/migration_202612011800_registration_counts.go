package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612011800RegistrationCounts keeps the live registrations per
// organisation, zone and phase (registration_counts) and per phase across the
// fleet (registration_phase_counts), so that the quota, a list's `total` and
// the fleet gauges are sums over a few counter rows, never a count of the
// registrations. Each counter is split into shards by the registration's id,
// so that concurrent creates of one organisation rarely wait on the same
// counter row. Like the inventory's counters, statement-level triggers
// aggregate each statement's transition tables once and write a counter only
// when it moved, in key order, so that two statements never lock counters in
// opposite orders.
func migration202612011800RegistrationCounts() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612011800",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE registration_counts (
	org_id text     NOT NULL,
	zone   text     NOT NULL,
	phase  text     NOT NULL,
	shard  smallint NOT NULL,
	live   bigint   NOT NULL,
	PRIMARY KEY (org_id, zone, phase, shard)
);
CREATE TABLE registration_phase_counts (
	phase text     NOT NULL,
	shard smallint NOT NULL,
	live  bigint   NOT NULL,
	PRIMARY KEY (phase, shard)
);
INSERT INTO registration_counts (org_id, zone, phase, shard, live)
	SELECT org_id, zone, phase, ` + registrationShard("registrations") + `, count(*) FROM registrations
	WHERE deleted_at IS NULL GROUP BY 1, 2, 3, 4;
INSERT INTO registration_phase_counts (phase, shard, live)
	SELECT phase, shard, sum(live) FROM registration_counts GROUP BY 1, 2;
CREATE FUNCTION registration_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER registration_counts_insert AFTER INSERT ON registrations
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registration_counts_apply();
CREATE TRIGGER registration_counts_update AFTER UPDATE ON registrations
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registration_counts_apply();
CREATE TRIGGER registration_counts_delete AFTER DELETE ON registrations
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registration_counts_apply();
CREATE TRIGGER registration_counts_truncate AFTER TRUNCATE ON registrations
	FOR EACH STATEMENT EXECUTE FUNCTION registration_counts_apply();
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TRIGGER registration_counts_truncate ON registrations;
DROP TRIGGER registration_counts_delete ON registrations;
DROP TRIGGER registration_counts_update ON registrations;
DROP TRIGGER registration_counts_insert ON registrations;
DROP FUNCTION registration_counts_apply();
DROP TABLE registration_phase_counts;
DROP TABLE registration_counts;
`).Error
		},
	}
}

// registrationShard is the counter shard of a registration row of table: one
// of 16, by its id.
func registrationShard(table string) string {
	return `(hashtext(` + table + `.id) & 15)::smallint`
}

// countedRows selects the live rows of a transition table as counter deltas.
func countedRows(table, sign string) string {
	return `SELECT org_id, zone, phase, ` + registrationShard(table) + `, ` + sign + `::bigint FROM ` + table + ` WHERE deleted_at IS NULL`
}

// applyCounts is the statement that adds the deltas moved selects to both
// counter tables, each in key order and only where the sum moved.
func applyCounts(moved string) string {
	return `WITH moved (org_id, zone, phase, shard, d) AS (` + moved + `),
		per_org AS (
			INSERT INTO registration_counts AS c (org_id, zone, phase, shard, live)
			SELECT org_id, zone, phase, shard, sum(d) FROM moved
			GROUP BY org_id, zone, phase, shard HAVING sum(d) <> 0 ORDER BY org_id, zone, phase, shard
			ON CONFLICT (org_id, zone, phase, shard) DO UPDATE SET live = c.live + excluded.live)
		INSERT INTO registration_phase_counts AS c (phase, shard, live)
		SELECT phase, shard, sum(d) FROM moved
		GROUP BY phase, shard HAVING sum(d) <> 0 ORDER BY phase, shard
		ON CONFLICT (phase, shard) DO UPDATE SET live = c.live + excluded.live`
}
