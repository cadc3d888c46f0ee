package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

func tableExists(t *testing.T, db *postgres.DB, name string) bool {
	t.Helper()
	var exists bool
	if err := db.Gorm.Raw("SELECT to_regclass(?) IS NOT NULL", name).Scan(&exists).Error; err != nil {
		t.Fatalf("to_regclass(%s): %v", name, err)
	}
	return exists
}

func TestMigrateUpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.NewDatabase(t))

	status, err := db.SchemaStatus(ctx)
	if err != nil {
		t.Fatalf("SchemaStatus() on a fresh database: %v", err)
	}
	if status.Current() || !slices.Equal(status.Missing, migrations.IDs()) {
		t.Fatalf("SchemaStatus() on a fresh database = %+v, want every migration missing", status)
	}
	if err := db.Ready(ctx); !errors.Is(err, postgres.ErrSchemaBehind) {
		t.Errorf("Ready() on a fresh database = %v, want ErrSchemaBehind", err)
	}

	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(): %v", err)
	}
	if !tableExists(t, db, "hubs") {
		t.Errorf("after Migrate(): table hubs missing")
	}
	if err := db.Ready(ctx); err != nil {
		t.Errorf("Ready() after Migrate() = %v, want nil", err)
	}
	// A second run is a no-op.
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again: %v", err)
	}

	if err := db.RollbackAll(ctx); err != nil {
		t.Fatalf("RollbackAll(): %v", err)
	}
	if tableExists(t, db, "hubs") {
		t.Errorf("after RollbackAll(): table hubs still exists")
	}
	status, err = db.SchemaStatus(ctx)
	if err != nil || len(status.Applied) != 0 {
		t.Errorf("SchemaStatus() after RollbackAll() = %+v, %v; want nothing applied", status, err)
	}
	// And up again: the down path leaves a database the up path accepts.
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() after RollbackAll(): %v", err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := pgtest.NewDatabase(t)
	errs := make(chan error, 4)
	for range 4 {
		db := pgtest.Open(t, cfg)
		go func() { errs <- db.Migrate(ctx) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Migrate(): %v", err)
		}
	}
	status, err := pgtest.Open(t, cfg).SchemaStatus(ctx)
	if err != nil || !status.Current() || len(status.Applied) != len(migrations.IDs()) {
		t.Errorf("SchemaStatus() after concurrent migrations = %+v, %v", status, err)
	}
}

func TestSchemaAheadIsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	if err := db.Gorm.Exec("INSERT INTO migrations (id) VALUES ('299912310001')").Error; err != nil {
		t.Fatalf("recording a future migration: %v", err)
	}
	status, err := db.SchemaStatus(ctx)
	if err != nil || !status.Current() || !slices.Equal(status.Unknown, []string{"299912310001"}) {
		t.Errorf("SchemaStatus() with a newer migration = %+v, %v; want current with one unknown", status, err)
	}
}

func TestDebugLogsEveryStatement(t *testing.T) {
	t.Parallel()
	cases := []struct {
		debug    bool
		wantSQL  bool
		wantArgs bool
	}{
		{debug: true, wantSQL: true, wantArgs: true},
		{debug: false, wantSQL: false, wantArgs: false},
	}
	cfg := pgtest.NewDatabase(t)
	for _, tc := range cases {
		var buf bytes.Buffer
		c := cfg
		c.Debug = tc.debug
		db, err := postgres.Open(c, slog.New(slog.NewJSONHandler(&buf, nil)))
		if err != nil {
			t.Fatalf("Open(): %v", err)
		}
		var got string
		if err := db.Gorm.Raw("SELECT ?::text AS marker", "secret-marker-42").Scan(&got).Error; err != nil {
			t.Fatalf("query: %v", err)
		}
		_ = db.Close()
		logged := buf.String()
		if has := strings.Contains(logged, "SELECT"); has != tc.wantSQL {
			t.Errorf("debug=%v: log has the statement = %v, want %v; log: %s", tc.debug, has, tc.wantSQL, logged)
		}
		if has := strings.Contains(logged, "secret-marker-42"); has != tc.wantArgs {
			t.Errorf("debug=%v: log has the bound value = %v, want %v", tc.debug, has, tc.wantArgs)
		}
	}
}

func TestFailedStatementsAreLoggedWithoutValues(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	db, err := postgres.Open(pgtest.NewDatabase(t), slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatalf("Open(): %v", err)
	}
	defer db.Close()
	err = db.Gorm.Exec("INSERT INTO no_such_table VALUES (?)", "password-like-value").Error
	if err == nil {
		t.Fatalf("insert into a missing table succeeded")
	}
	if !strings.Contains(buf.String(), "sql failed") || strings.Contains(buf.String(), "password-like-value") {
		t.Errorf("log of a failed statement = %s; want 'sql failed' without the bound value", buf.String())
	}
}
