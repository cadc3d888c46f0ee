package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020700RecountRegistrations counts the registration
// counters of migrations 202612011800 and 202612012100 again, from the rows,
// with writes to registrations held. Those migrations counted the rows before
// their triggers took effect, without holding writes: a registration a
// still-running replica wrote in between was counted by neither, and the
// quota and the list's totals would be off by it for good. A database
// migrated without concurrent writes gets the counts it has.
func migration202612020700RecountRegistrations() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020700",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
LOCK TABLE registrations IN SHARE ROW EXCLUSIVE MODE;
DELETE FROM registration_counts;
INSERT INTO registration_counts (org_id, zone, phase, shard, live)
	SELECT org_id, zone, phase, ` + registrationShard("registrations") + `, count(*) FROM registrations
	WHERE deleted_at IS NULL GROUP BY 1, 2, 3, 4;
DELETE FROM registration_phase_counts;
INSERT INTO registration_phase_counts (phase, shard, live)
	SELECT phase, shard, sum(live) FROM registration_counts GROUP BY 1, 2;
DELETE FROM registration_label_counts;
INSERT INTO registration_label_counts (org_id, key, value, zone, shard, live)
	SELECT org_id, key, value, zone, shard, sum(d) FROM (` + labelCountedRows("registrations", "1") + `) AS moved
	GROUP BY 1, 2, 3, 4, 5;
`).Error
		},
		// The counts are the rows', whichever migration wrote them.
		Rollback: func(*gorm.DB) error { return nil },
	}
}
