// Package migrations is the fleet manager's schema: every migration, in
// order, and the runner that applies them under an advisory lock. It knows
// nothing of the store: it runs on a *gorm.DB, and the postgres package,
// whose readiness compares the database with IDs, calls it
// (docs/architecture.md). What a migration may change: docs/migrations.md.
package migrations

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// table is gormigrate's bookkeeping table.
const table = "migrations"

// migrationLockKey is the advisory lock that serialises replicas migrating at
// once (every replica's init container runs `migrate`). Any constant works, as
// long as it never changes.
const migrationLockKey = 7_031_960_114

// all returns every migration in order. Each defines its own SQL and
// never refers to the live models, so later model changes cannot rewrite
// history. Migrations are forward-only in production; each has a tested
// Rollback for development and for the tests.
func all() []*gormigrate.Migration {
	return []*gormigrate.Migration{
		migration202611300001Hubs(),
		migration202611300002Registrations(),
		migration202611300003Inventory(),
		migration202611300004SyncSet(),
		migration202611300005Resources(),
		migration202611300006Feed(),
		migration202611300007InventoryReads(),
		migration202611300008ClusterView(),
		migration202611300009Policies(),
		migration202611300010ResourcesFeed(),
		migration202611300011InventoryFacets(),
		migration202611300012FeedOrg(),
		migration202611300013InventoryDocuments(),
		migration202611300014PolicyDelivery(),
		migration202612011200Converge(),
		migration202612011400DeliveryFailures(),
		migration202612011800RegistrationCounts(),
		migration202612011900RegistrationReads(),
		migration202612012000RegistrationAcks(),
		migration202612012100RegistrationLabelCounts(),
		migration202612012200ClaimOrder(),
		migration202612020100DesiredChanges(),
		migration202612020200ClaimAcknowledged(),
		migration202612020300DeprovisionWork(),
		migration202612020400HubWokenRevision(),
		migration202612020500RegistrationLabels(),
		migration202612020600ListZone(),
		migration202612020700RecountRegistrations(),
		migration202612020800CapacityPools(),
		migration202612020900PoolWake(),
		migration202612021000PoolConditions(),
		migration202612021100Autovacuum(),
		migration202612021200RevisionHistory(),
		migration202612021400ClusterIdentity(),
		migration202612021500DNS(),
		migration202612021600DNSRecordCounts(),
		migration202612021700OrgLimits(),
		migration202612072200AckWakeCursor(),
	}
}

// IDs returns the ids of every migration this binary knows, in order.
func IDs() []string {
	var ids []string
	for _, m := range all() {
		ids = append(ids, m.ID)
	}
	return ids
}

// Applied returns the ids of the migrations recorded in the database, in
// order; none before the first migration created the bookkeeping table.
func Applied(tx *gorm.DB) ([]string, error) {
	var applied []string
	var exists bool
	if err := tx.Raw("SELECT to_regclass(?) IS NOT NULL", table).Scan(&exists).Error; err != nil {
		return nil, err
	}
	if exists {
		if err := tx.Raw("SELECT id FROM " + table + " ORDER BY id").Scan(&applied).Error; err != nil {
			return nil, err
		}
	}
	return applied, nil
}

func newMigrator(tx *gorm.DB) *gormigrate.Gormigrate {
	return newMigratorOf(tx, all())
}

func newMigratorOf(tx *gorm.DB, ms []*gormigrate.Migration) *gormigrate.Gormigrate {
	opts := *gormigrate.DefaultOptions
	opts.TableName = table
	opts.UseTransaction = true
	return gormigrate.New(tx, &opts, ms)
}

// Migrate applies every pending migration to db, holding an advisory lock so
// that replicas started together migrate one after the other. It logs, when
// logger is not nil, how many are pending, then a line for each one done:
// its id, n of the pending, how long it took. All of them commit together,
// at the end.
func Migrate(ctx context.Context, db *gorm.DB, logger *slog.Logger) error {
	return withLock(ctx, db, func(tx *gorm.DB) error {
		// A session of its own: a statement chained on tx itself would
		// leave its table and destination in the migrator's statements.
		applied, err := Applied(tx.Session(&gorm.Session{}))
		if err != nil {
			return err
		}
		var missing []string
		for _, id := range IDs() {
			if !slices.Contains(applied, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 && logger != nil {
			logger.InfoContext(ctx, "applying migrations", "pending", len(missing), "first", missing[0],
				"last", missing[len(missing)-1])
		}
		return newMigratorOf(tx, logged(ctx, logger, len(missing))).Migrate()
	})
}

// logged are the migrations, each logging a progress line once it ran: an
// operator watching a long migrate sees it move.
func logged(ctx context.Context, logger *slog.Logger, pending int) []*gormigrate.Migration {
	ms := all()
	if logger == nil {
		return ms
	}
	done := 0
	for _, m := range ms {
		run := m.Migrate
		m.Migrate = func(tx *gorm.DB) error {
			start := time.Now()
			if err := run(tx); err != nil {
				return err
			}
			done++
			logger.InfoContext(ctx, "migration done", "id", m.ID, "n", done, "of", pending, "elapsed", time.Since(start))
			return nil
		}
	}
	return ms
}

// MigrateTo applies to db the migrations up to and including id.
func MigrateTo(ctx context.Context, db *gorm.DB, id string) error {
	return withLock(ctx, db, func(tx *gorm.DB) error {
		return newMigrator(tx).MigrateTo(id)
	})
}

// RollbackAll rolls every migration applied to db back, newest first. It
// exists for development and tests; production schemas only move forward.
func RollbackAll(ctx context.Context, db *gorm.DB) error {
	return withLock(ctx, db, func(tx *gorm.DB) error {
		m := newMigrator(tx)
		for {
			applied, err := Applied(tx)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				return nil
			}
			if err := m.RollbackLast(); err != nil {
				return err
			}
		}
	})
}

// withLock runs fn on one connection of db's pool while it holds migrationLockKey.
func withLock(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		if err := conn.Exec("SELECT pg_advisory_lock(?)", migrationLockKey).Error; err != nil {
			return err
		}
		defer conn.Exec("SELECT pg_advisory_unlock(?)", migrationLockKey)
		return fn(conn)
	})
}

// LabelCountedRows is labelCountedRows, for the store's SyncCountedLabels:
// a label it starts counting is counted as the triggers of migration
// 202612012100 count it, in the same shards.
func LabelCountedRows(table, sign string) string { return labelCountedRows(table, sign) }
