package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
)

// templateLockKey is the advisory lock, taken in the maintenance database,
// that serialises test binaries building the same template: `go test ./...`
// runs several packages at once. Any constant works, as long as it never
// changes.
const templateLockKey = 7_031_960_115

// objectInUse is the SQLSTATE of "source database is being accessed by other
// users", which CREATE DATABASE ... TEMPLATE and RENAME return while a session
// is connected to the database.
const objectInUse = "55006"

var built struct {
	mu   sync.Mutex
	name string
}

// migratedTemplate returns the name of a database with every migration this
// binary knows applied, building it on the server the first time. The name is
// a hash of the migrations (migrationsDigest), so a binary with other
// migrations never copies a template of another schema; templates stay on the
// server between runs.
// Nobody may connect to a template (ALLOW_CONNECTIONS false), since copying
// fails while a session is connected to it.
func migratedTemplate() (string, error) {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.name != "" {
		return built.name, nil
	}
	_, self, _, _ := runtime.Caller(0)
	sum := migrationsDigest(migrations.IDs(), filepath.Join(filepath.Dir(self), "..", "migrations"))
	name := "fmtpl_" + hex.EncodeToString(sum[:8])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := buildTemplate(ctx, name); err != nil {
		return "", fmt.Errorf("template database %s: %w", name, err)
	}
	built.name = name
	return name, nil
}

// migrationsDigest is the SHA-256 of the migration ids and of the files of
// dir that hold the migrations (migration*.go), so that a migration edited
// under its id builds a template of its own. go test builds from the source,
// so the files are at hand; where they are not (a binary built with
// -trimpath, run elsewhere), the ids alone are hashed.
func migrationsDigest(ids []string, dir string) []byte {
	h := sha256.New()
	h.Write([]byte(strings.Join(ids, "\n")))
	files, _ := filepath.Glob(filepath.Join(dir, "migration*.go"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			h.Write([]byte("\n" + filepath.Base(f) + "\n"))
			h.Write(b)
		}
	}
	return h.Sum(nil)
}

// buildTemplate creates and migrates the template called name unless it
// exists. It migrates under another name and renames when done, so a template
// that exists is complete even if a binary died while building one.
func buildTemplate(ctx context.Context, name string) (err error) {
	server := ServerConfig()
	conn, err := connectServer(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(templateLockKey)); err != nil {
		return fmt.Errorf("waiting for the template lock: %w", err)
	}
	defer func() {
		_, uerr := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", int64(templateLockKey))
		err = errors.Join(err, uerr)
	}()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	build := name + "_build"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+build+" WITH (FORCE)"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+build); err != nil {
		return err
	}
	cfg := server
	cfg.Name = build
	db, err := postgres.Open(cfg, discardLogger())
	if err != nil {
		return err
	}
	err = db.Migrate(ctx)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The pool's sessions may still be ending on the server after Close.
	if err := retryInUse(ctx, conn, "ALTER DATABASE "+build+" RENAME TO "+name); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
	return err
}

// createFromTemplate creates the database name as a copy of template.
func createFromTemplate(ctx context.Context, conn *pgx.Conn, name, template string) error {
	return retryInUse(ctx, conn, "CREATE DATABASE "+name+" TEMPLATE "+template)
}

// retryInUse runs sql, again while it fails because a session is connected
// to the database it names, for at most ten seconds.
func retryInUse(ctx context.Context, conn *pgx.Conn, sql string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != objectInUse || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
