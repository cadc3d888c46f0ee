package postgres

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
)

// The migrations and the runner that applies them are the migrations
// package's; these methods run it on db's pool and name db in its errors.

// Migrate applies every pending migration (migrations.Migrate), logging
// its progress to db's logger.
func (db *DB) Migrate(ctx context.Context) error {
	return db.migrateErr(migrations.Migrate(ctx, db.Gorm, db.logger))
}

// MigrateTo applies migrations up to and including id.
func (db *DB) MigrateTo(ctx context.Context, id string) error {
	return db.migrateErr(migrations.MigrateTo(ctx, db.Gorm, id))
}

// RollbackAll rolls every applied migration back, newest first. It exists for
// development and tests; production schemas only move forward.
func (db *DB) RollbackAll(ctx context.Context) error {
	return db.migrateErr(migrations.RollbackAll(ctx, db.Gorm))
}

func (db *DB) migrateErr(err error) error {
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
	applied, err := migrations.Applied(tx)
	if err != nil {
		return SchemaStatus{}, err
	}
	known := migrations.IDs()
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
