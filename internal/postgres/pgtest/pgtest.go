// Package pgtest gives each test its own PostgreSQL database on the server the
// tests use, so tests that touch data run in parallel without seeing each
// other. The server is 127.0.0.1:5432 as user postgres unless
// FLEET_MANAGER_TEST_DB_HOST, _PORT, _USER or _PASSWORD say otherwise.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// ServerConfig returns the configuration of the test server's maintenance
// database, from the environment.
func ServerConfig() postgres.Config {
	cfg := postgres.DefaultConfig()
	cfg.Name = "postgres"
	if v := os.Getenv("FLEET_MANAGER_TEST_DB_HOST"); v != "" {
		cfg.Host = v
	}
	if v := os.Getenv("FLEET_MANAGER_TEST_DB_PORT"); v != "" {
		if p, err := strconv.Atoi(v); err == nil {
			cfg.Port = p
		}
	}
	if v := os.Getenv("FLEET_MANAGER_TEST_DB_USER"); v != "" {
		cfg.User = v
	}
	cfg.Password = os.Getenv("FLEET_MANAGER_TEST_DB_PASSWORD")
	cfg.MaxOpenConns = 5
	cfg.MaxIdleConns = 2
	return cfg
}

// NewDatabase creates an empty database for t, dropped when t ends, and returns
// its configuration. It fails t (never skips it) when the server is unreachable.
func NewDatabase(t testing.TB) postgres.Config {
	t.Helper()
	return newDatabase(t, "")
}

// NewMigratedDatabase is NewDatabase with every migration applied, and an open pool
// that is closed when t ends. The database is a copy of a template migrated
// once per schema version (see template.go), so the test does not pay for
// running every migration; tests of the migrations themselves use NewDatabase.
func NewMigratedDatabase(t testing.TB) (*postgres.DB, postgres.Config) {
	t.Helper()
	tpl, err := migratedTemplate()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg := newDatabase(t, tpl)
	return Open(t, cfg), cfg
}

// newDatabase creates a database for t, a copy of template when it is not
// empty.
func newDatabase(t testing.TB, template string) postgres.Config {
	t.Helper()
	server := ServerConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connectServer(ctx, server)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	name := "fmtest_" + randomSuffix(t)
	if template == "" {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	} else {
		err = createFromTemplate(ctx, conn, name, template)
	}
	if err != nil {
		t.Fatalf("pgtest: CREATE DATABASE %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, server, name) })
	cfg := server
	cfg.Name = name
	return cfg
}

// connectServer connects to the server's maintenance database, with the
// message that tells the developer how to get a server.
func connectServer(ctx context.Context, server postgres.Config) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, server.DSN())
	if err != nil {
		return nil, fmt.Errorf("no PostgreSQL at %s:%d as %s (%v): start one with `make db/setup`, or set FLEET_MANAGER_TEST_DB_HOST/_PORT/_USER/_PASSWORD",
			server.Host, server.Port, server.User, err)
	}
	return conn, nil
}

// Open opens a pool on cfg with a discarding logger, closed when t ends.
func Open(t testing.TB, cfg postgres.Config) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(cfg, discardLogger())
	if err != nil {
		t.Fatalf("pgtest: Open(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func dropDatabase(t testing.TB, server postgres.Config, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server.DSN())
	if err != nil {
		t.Errorf("pgtest: dropping %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: DROP DATABASE %s: %v", name, err)
	}
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return fmt.Sprintf("%d_%s", os.Getpid(), hex.EncodeToString(b))
}
