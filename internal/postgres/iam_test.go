package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

func TestIAMAuthValidate(t *testing.T) {
	t.Parallel()
	iam := func(c *postgres.Config) {
		c.IAM = postgres.IAMAuth{Enabled: true, Region: "eu-west-1"}
		c.SSLMode = "verify-full"
	}
	for _, tc := range []struct {
		name   string
		mutate func(*postgres.Config)
		want   []string
	}{
		{"iam", iam, nil},
		{"no region", func(c *postgres.Config) { iam(c); c.IAM.Region = " " }, []string{"--db-iam-region: is required with --db-iam-auth"}},
		{"and a password", func(c *postgres.Config) { iam(c); c.Password = "p" }, []string{"--db-iam-auth: and --db-password"}},
		{"without TLS", func(c *postgres.Config) { iam(c); c.SSLMode = "prefer" }, []string{`--db-iam-auth: needs TLS`}},
		{"region alone", func(c *postgres.Config) { c.IAM.Region = "eu-west-1" }, []string{"--db-iam-region: is only used with --db-iam-auth"}},
	} {
		cfg := postgres.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %v, want it to contain %q", tc.name, err, w)
			}
		}
	}
}

// passwordAuthServer starts a server that checks passwords (scram) for every
// user but postgres, and returns an admin connection and the configuration
// of a database owned by user, who has no password yet.
func passwordAuthServer(t *testing.T, user string) (*pgx.Conn, postgres.Config) {
	t.Helper()
	s := pgtest.StartServer(t)
	cfg := s.NewDatabase(t, "iam")
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, s.Config().DSN())
	if err != nil {
		t.Fatalf("connect as postgres: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, "CREATE ROLE "+user+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	hba := "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(s.DataDir(), "pg_hba.conf"), []byte(hba), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	cfg.User = user
	// The reload is asynchronous: wait until a wrong password is refused.
	wrong := cfg
	wrong.Password = "wrong"
	gomega.NewWithT(t).Eventually(func() error {
		conn, err := pgx.Connect(ctx, wrong.DSN())
		if err == nil {
			_ = conn.Close(ctx)
			return errors.New("a wrong password let in")
		}
		if !isCode(err, "28P01") {
			return err
		}
		return nil
	}).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Succeed(),
		"the server checks %s's password after pg_reload_conf", user)
	return admin, cfg
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// TestEveryNewConnectionTakesAFreshPassword plays RDS IAM authentication on
// a real server: the password source stands for the token signer, and, as
// RDS accepts only a fresh token, it makes each password the only one the
// server accepts from then on. Every connection of the pool and the
// listener's must then ask for its own.
func TestEveryNewConnectionTakesAFreshPassword(t *testing.T) {
	t.Parallel()
	admin, cfg := passwordAuthServer(t, "iam_user")
	var mu sync.Mutex
	var issued []string
	cfg.Passwords = func(ctx context.Context, host string, port uint16, user string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if host != "127.0.0.1" || int(port) != cfg.Port || user != "iam_user" {
			return "", fmt.Errorf("password asked for %s@%s:%d", user, host, port)
		}
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		pw := hex.EncodeToString(b)
		if _, err := admin.Exec(ctx, "ALTER ROLE iam_user PASSWORD '"+pw+"'"); err != nil {
			return "", err
		}
		issued = append(issued, pw)
		return pw, nil
	}
	calls := func() int { mu.Lock(); defer mu.Unlock(); return len(issued) }

	cfg.MaxOpenConns, cfg.MaxIdleConns = 3, 0
	db := pgtest.Open(t, cfg)
	ctx := t.Context()
	var held []interface{ Close() error }
	for i := range 3 {
		conn, err := db.SQL().Conn(ctx)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, conn)
		var who string
		if err := conn.QueryRowContext(ctx, "SELECT current_user").Scan(&who); err != nil || who != "iam_user" {
			t.Fatalf("connection %d: current_user = %q, %v", i, who, err)
		}
	}
	if got := calls(); got != 3 {
		t.Errorf("passwords asked for 3 open connections = %d, want 3", got)
	}
	for _, c := range held {
		_ = c.Close() // MaxIdleConns 0: the pool closes them
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping with a new connection: %v", err)
	}
	if got := calls(); got != 4 {
		t.Errorf("passwords asked after a fourth connection = %d, want 4", got)
	}

	conn, err := postgres.ConnectForTest(ctx, cfg)
	if err != nil {
		t.Fatalf("listener's connection: %v", err)
	}
	_ = conn.Close(ctx)
	if got := calls(); got != 5 {
		t.Errorf("passwords asked after the listener's connection = %d, want 5", got)
	}

	// The server checks what the source gives: a stale password is refused.
	stale := cfg
	stale.Passwords = func(context.Context, string, uint16, string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return issued[0], nil
	}
	if _, err := postgres.ConnectForTest(ctx, stale); !isCode(err, "28P01") {
		t.Errorf("connect with a stale password: err = %v, want 28P01 invalid_password", err)
	}
}
