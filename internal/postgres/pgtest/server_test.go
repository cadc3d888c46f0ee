package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestOwnedServerStopsCrashesAndFreezes: the owned server keeps its port and
// its committed rows across a fast restart and a crash, and a frozen one
// answers nothing until it is thawed.
func TestOwnedServerStopsCrashesAndFreezes(t *testing.T) {
	t.Parallel()
	server := pgtest.StartServer(t)
	cfg := server.NewDatabase(t, "owned")
	exec := func(timeout time.Duration, sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, cfg.DSN())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(5*time.Second, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	server.Restart(false)
	if err := exec(5*time.Second, "INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatalf("after a fast restart: %v", err)
	}
	server.Restart(true)
	if err := exec(5*time.Second, "DO $$ BEGIN IF (SELECT count(*) FROM kept) <> 2 THEN RAISE 'rows lost'; END IF; END $$"); err != nil {
		t.Fatalf("after a crash: %v", err)
	}
	// A session opened before the freeze is frozen too.
	ctx := context.Background()
	open, err := pgx.Connect(ctx, cfg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(ctx)
	server.Freeze()
	if err := exec(500*time.Millisecond, "SELECT 1"); err == nil {
		t.Errorf("a frozen server answered a new connection")
	}
	frozen, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := open.Exec(frozen, "SELECT 1"); err == nil {
		t.Errorf("a frozen server answered on a connection opened before")
	}
	server.Thaw()
	if err := exec(5*time.Second, "SELECT 1"); err != nil {
		t.Errorf("after a thaw: %v", err)
	}
}
