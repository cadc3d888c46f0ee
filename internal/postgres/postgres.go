// Package postgres is the service's PostgreSQL adapter: connection pool, GORM,
// migrations and schema checks. It is the only package that speaks SQL.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// DB is an open connection pool.
type DB struct {
	// Gorm is the GORM handle; service methods open transactions on it.
	Gorm *gorm.DB
	sql  *sql.DB
	name string
	// logger is the caller's, for what the database does outside a
	// statement (migrate's progress).
	logger *slog.Logger
}

// Open returns a pool on the database described by cfg, with its limits set.
// It does not connect: the first query does, and readiness reports a database
// that does not answer.
func Open(cfg Config, logger *slog.Logger) (*DB, error) {
	// The pool is opened here, not by GORM's dialector: its connections tag
	// every statement with its operation (tagging.go) and, with
	// --db-iam-auth, take a fresh password each (iam.go).
	pool, err := openPool(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("Open(%s): %w", cfg.Name, err)
	}
	// GORM runs every statement through waitPool, which bounds a request's
	// wait for the database (wait.go).
	pg := postgres.New(postgres.Config{Conn: waitPool{db: pool, bound: cfg.WaitTimeout}}).(*postgres.Dialector)
	gdb, err := gorm.Open(dialector{pg}, &gorm.Config{
		Logger:                 newGormLogger(logger, cfg.Debug, cfg.SlowThreshold),
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
		// Errors go through dialector.Translate: a lost connection becomes
		// fleet.CodeUnavailable, wherever the statement ran.
		TranslateError: true,
	})
	if err != nil {
		_ = pool.Close()
		return nil, fmt.Errorf("Open(%s): %w", cfg.Name, err)
	}
	// GORM's row callback (Row, Rows, Raw(...).Scan) sets its query's error
	// without the translation: translate it after.
	if err := gdb.Callback().Row().After("gorm:row").Register("fleet:translate_error", func(tx *gorm.DB) {
		tx.Error = translateError(tx.Error)
	}); err != nil {
		return nil, fmt.Errorf("Open(%s): %w", cfg.Name, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("Open(%s): %w", cfg.Name, err)
	}
	sqlDB.SetMaxOpenConns(cfg.MaxOpenConns)
	sqlDB.SetMaxIdleConns(cfg.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	sqlDB.SetConnMaxIdleTime(cfg.ConnMaxIdleTime)
	return &DB{Gorm: gdb, sql: sqlDB, name: cfg.Name, logger: logger}, nil
}

// SQL returns the underlying pool, for pool statistics.
func (db *DB) SQL() *sql.DB { return db.sql }

// Name returns the database name.
func (db *DB) Name() string { return db.name }

// Close closes the pool, waiting for connections in use to be returned.
func (db *DB) Close() error { return db.sql.Close() }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.sql.PingContext(ctx); err != nil {
		return fmt.Errorf("Ping(%s): %w", db.name, err)
	}
	return nil
}

// Ready reports whether the database answers and its schema is current: what
// the readiness probe asks. Its errors are *fleet.Error whose message names
// neither the server nor the user ("database unreachable"); the cause, which
// does, is kept for the log.
func (db *DB) Ready(ctx context.Context) error {
	status, err := db.readySchema(ctx)
	if err != nil {
		return &fleet.Error{Code: fleet.CodeUnavailable, Message: "database unreachable", Err: err}
	}
	if !status.Current() {
		return &fleet.Error{Code: fleet.CodeUnavailable, Message: ErrSchemaBehind.Error(), Err: fmt.Errorf("Ready(%s): %w", db.name, status.Err())}
	}
	return nil
}

// readySchema pings the database and reads its schema's status.
func (db *DB) readySchema(ctx context.Context) (SchemaStatus, error) {
	if err := db.Ping(ctx); err != nil {
		return SchemaStatus{}, err
	}
	return db.SchemaStatus(ctx)
}

// ErrSchemaBehind is returned when the database lacks migrations this binary knows.
var ErrSchemaBehind = errors.New("database schema is older than this binary: run `fleet-manager migrate`")
