package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migrationsTable is gormigrate's bookkeeping table.
const migrationsTable = "migrations"

// migrationLockKey is the advisory lock that serialises replicas migrating at
// once (every replica's init container runs `migrate`). Any constant works, as
// long as it never changes.
const migrationLockKey = 7_031_960_114

// migrations returns every migration in order. Each defines its own SQL and
// never refers to the live models, so later model changes cannot rewrite
// history. Migrations are forward-only in production; each has a tested
// Rollback for development and for the tests.
func migrations() []*gormigrate.Migration {
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
	}
}

// MigrationIDs returns the ids of every migration this binary knows, in order.
func MigrationIDs() []string {
	var ids []string
	for _, m := range migrations() {
		ids = append(ids, m.ID)
	}
	return ids
}

func newMigrator(tx *gorm.DB) *gormigrate.Gormigrate {
	return newMigratorOf(tx, migrations())
}

func newMigratorOf(tx *gorm.DB, ms []*gormigrate.Migration) *gormigrate.Gormigrate {
	opts := *gormigrate.DefaultOptions
	opts.TableName = migrationsTable
	opts.UseTransaction = true
	return gormigrate.New(tx, &opts, ms)
}

// Migrate applies every pending migration, holding an advisory lock so that
// replicas started together migrate one after the other. It logs how many
// are pending, then a line for each one done: its id, n of the pending, how
// long it took. All of them commit together, at the end.
func (db *DB) Migrate(ctx context.Context) error {
	return db.withMigrationLock(ctx, func(tx *gorm.DB) error {
		// A session of its own: a statement chained on tx itself would
		// leave its table and destination in the migrator's statements.
		status, err := schemaStatus(tx.Session(&gorm.Session{}))
		if err != nil {
			return err
		}
		if len(status.Missing) > 0 && db.logger != nil {
			db.logger.InfoContext(ctx, "applying migrations", "pending", len(status.Missing), "first", status.Missing[0],
				"last", status.Missing[len(status.Missing)-1])
		}
		return newMigratorOf(tx, db.loggedMigrations(ctx, len(status.Missing))).Migrate()
	})
}

// loggedMigrations are the migrations, each logging a progress line once it
// ran: an operator watching a long migrate sees it move.
func (db *DB) loggedMigrations(ctx context.Context, pending int) []*gormigrate.Migration {
	ms := migrations()
	if db.logger == nil {
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
			db.logger.InfoContext(ctx, "migration done", "id", m.ID, "n", done, "of", pending, "elapsed", time.Since(start))
			return nil
		}
	}
	return ms
}

// MigrateTo applies migrations up to and including id.
func (db *DB) MigrateTo(ctx context.Context, id string) error {
	return db.withMigrationLock(ctx, func(tx *gorm.DB) error {
		return newMigrator(tx).MigrateTo(id)
	})
}

// RollbackAll rolls every applied migration back, newest first. It exists for
// development and tests; production schemas only move forward.
func (db *DB) RollbackAll(ctx context.Context) error {
	return db.withMigrationLock(ctx, func(tx *gorm.DB) error {
		m := newMigrator(tx)
		for {
			status, err := schemaStatus(tx)
			if err != nil {
				return err
			}
			if len(status.Applied) == 0 {
				return nil
			}
			if err := m.RollbackLast(); err != nil {
				return err
			}
		}
	})
}

func (db *DB) withMigrationLock(ctx context.Context, fn func(tx *gorm.DB) error) error {
	err := db.Gorm.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		if err := conn.Exec("SELECT pg_advisory_lock(?)", migrationLockKey).Error; err != nil {
			return err
		}
		defer conn.Exec("SELECT pg_advisory_unlock(?)", migrationLockKey)
		return fn(conn)
	})
	if err != nil {
		return fmt.Errorf("Migrate(%s): %w", db.name, err)
	}
	return nil
}

// SchemaStatus compares the migrations applied to the database with those this
// binary knows.
type SchemaStatus struct {
	// Applied are the ids recorded in the database.
	Applied []string
	// Missing are ids this binary knows that the database has not applied.
	Missing []string
	// Unknown are applied ids this binary does not know: a newer binary migrated.
	Unknown []string
}

// Current reports whether every known migration is applied. A schema ahead of
// the binary (Unknown non-empty) is current: migrations are additive, so an
// older replica keeps running during a rolling upgrade.
func (s SchemaStatus) Current() bool { return len(s.Missing) == 0 }

// Err describes a schema that is not current, or returns nil.
func (s SchemaStatus) Err() error {
	if s.Current() {
		return nil
	}
	return fmt.Errorf("%w (missing %v)", ErrSchemaBehind, s.Missing)
}

// SchemaStatus reads the applied migrations.
func (db *DB) SchemaStatus(ctx context.Context) (SchemaStatus, error) {
	s, err := schemaStatus(db.Gorm.WithContext(ctx))
	if err != nil {
		return SchemaStatus{}, fmt.Errorf("SchemaStatus(%s): %w", db.name, err)
	}
	return s, nil
}

func schemaStatus(tx *gorm.DB) (SchemaStatus, error) {
	var applied []string
	var exists bool
	if err := tx.Raw("SELECT to_regclass(?) IS NOT NULL", migrationsTable).Scan(&exists).Error; err != nil {
		return SchemaStatus{}, err
	}
	if exists {
		if err := tx.Raw("SELECT id FROM " + migrationsTable + " ORDER BY id").Scan(&applied).Error; err != nil {
			return SchemaStatus{}, err
		}
	}
	known := MigrationIDs()
	s := SchemaStatus{Applied: applied}
	for _, id := range known {
		if !slices.Contains(applied, id) {
			s.Missing = append(s.Missing, id)
		}
	}
	for _, id := range applied {
		if !slices.Contains(known, id) {
			s.Unknown = append(s.Unknown, id)
		}
	}
	return s, nil
}
