package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// queryPaths runs one statement through each way the store reaches the
// database: GORM outside and inside a transaction, and the pgx round trip.
func queryPaths(sql string, args ...any) map[string]func(ctx context.Context, db *postgres.DB) error {
	return map[string]func(ctx context.Context, db *postgres.DB) error{
		"gorm": func(ctx context.Context, db *postgres.DB) error {
			return db.Gorm.WithContext(ctx).Exec(sql, args...).Error
		},
		"gorm scan": func(ctx context.Context, db *postgres.DB) error {
			var ignored []any
			return db.Gorm.WithContext(ctx).Raw(sql, args...).Scan(&ignored).Error
		},
		"transaction": func(ctx context.Context, db *postgres.DB) error {
			return db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return tx.Exec(sql, args...).Error })
		},
		"roundTrip": func(ctx context.Context, db *postgres.DB) error {
			pgSQL := sql
			for i := range args {
				pgSQL = strings.Replace(pgSQL, "?", "$"+string(rune('1'+i)), 1)
			}
			var ignored any
			return postgres.RoundTripForTest(ctx, db, postgres.NewStatementForTest(pgSQL, args, false, postgres.ReadOneForTest(&ignored)))
		},
	}
}

// TestLostDatabaseIsUnavailable: a stopped server, a terminated backend and
// a request's deadline are unavailability (503), on every path, with the
// cause kept and never in the message.
func TestLostDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	direct := pgtest.NewDatabase(t)
	proxy, cfg := pgtest.NewProxy(t, direct)
	cfg.ConnectTimeout = time.Second
	cfg.MaxOpenConns, cfg.MaxIdleConns = 1, 1
	db := pgtest.Open(t, cfg)
	admin := pgtest.Open(t, direct)
	ctx := context.Background()

	wantUnavailable := func(what string, err error) {
		t.Helper()
		if code := fleet.ErrorCodeOf(err); code != fleet.CodeUnavailable {
			t.Errorf("%s = %v (code %d), want CodeUnavailable", what, err, code)
		}
		if err != nil && fleet.ErrorMessageOf(err) != "the database is unavailable; retry later" {
			t.Errorf("%s: message %q, want the generic one", what, fleet.ErrorMessageOf(err))
		}
		if errors.Unwrap(err) == nil {
			t.Errorf("%s: the cause is lost", what)
		}
	}
	for name, run := range queryPaths("SELECT 1") {
		if err := run(ctx, db); err != nil {
			t.Fatalf("%s before the outage: %v", name, err)
		}
		proxy.Stop()
		wantUnavailable(name+" on a stopped server", run(ctx, db))
		proxy.Start()

		// A backend the server ends (a fast shutdown, pg_terminate_backend)
		// fails the statement it was running.
		sleeping := make(chan error, 1)
		marker := "terminate " + name
		go func() { sleeping <- queryPaths("/* " + marker + " */ SELECT pg_sleep(10)")[name](ctx, db) }()
		terminated := func() bool {
			var n int
			err := admin.Gorm.Raw(`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE ? AND state = 'active'`, "/* "+marker+" */%").Scan(&n).Error
			return err == nil && n > 0
		}
		gomega.NewWithT(t).Eventually(terminated).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).Should(gomega.BeTrue())
		wantUnavailable(name+" on a terminated backend", <-sleeping)

		deadline, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := queryPaths("SELECT pg_sleep(10)")[name](deadline, db)
		cancel()
		wantUnavailable(name+" past the deadline", err)
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("%s past a 200ms deadline took %s", name, elapsed)
		}
	}
}

// TestTextTheDatabaseRefusesIsInvalid: a NUL or a byte outside UTF-8 that
// reaches PostgreSQL is the caller's error (400), whose message names no value.
func TestTextTheDatabaseRefusesIsInvalid(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, pgtest.NewDatabase(t))
	for _, text := range []string{"secret\x00value", "secret\xffvalue"} {
		for name, run := range queryPaths("SELECT ?::text", text) {
			err := run(context.Background(), db)
			if code := fleet.ErrorCodeOf(err); code != fleet.CodeValidation {
				t.Errorf("%s(%q) = %v (code %d), want CodeValidation", name, text, err, code)
			}
			if msg := fleet.ErrorMessageOf(err); strings.Contains(msg, "secret") || strings.Contains(msg, "0x") {
				t.Errorf("%s(%q): message %q names the value", name, text, msg)
			}
		}
	}
}

// TestUniqueViolationStaysReadable: the translation leaves a unique
// violation as PostgreSQL's error, which the store reads by code.
func TestUniqueViolationStaysReadable(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, pgtest.NewDatabase(t))
	if err := db.Gorm.Exec("CREATE TABLE u (k text CONSTRAINT u_k UNIQUE)").Error; err != nil {
		t.Fatal(err)
	}
	insert := func() error {
		return db.Gorm.Transaction(func(tx *gorm.DB) error { return tx.Exec("INSERT INTO u VALUES ('a')").Error })
	}
	if err := insert(); err != nil {
		t.Fatal(err)
	}
	err := insert()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "u_k" {
		t.Errorf("second insert = %v, want PostgreSQL's unique violation of u_k", err)
	}
	if code := fleet.ErrorCodeOf(err); code != fleet.CodeInternal {
		t.Errorf("second insert: code %d, want it left to the store (CodeInternal)", code)
	}
}

// TestStatementTimeoutIsUnavailable: the server cancels a statement past
// --db-statement-timeout, whatever the caller's context, and that is
// unavailability too.
func TestStatementTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	cfg.StatementTimeout = 200 * time.Millisecond
	db := pgtest.Open(t, cfg)
	for name, run := range queryPaths("SELECT pg_sleep(10)") {
		start := time.Now()
		err := run(context.Background(), db)
		if code := fleet.ErrorCodeOf(err); code != fleet.CodeUnavailable {
			t.Errorf("%s past statement_timeout = %v (code %d), want CodeUnavailable", name, err, code)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("%s past a 200ms statement_timeout took %s", name, elapsed)
		}
	}
	var timeout string
	if err := db.Gorm.Raw("SHOW statement_timeout").Scan(&timeout).Error; err != nil || timeout != "200ms" {
		t.Errorf("SHOW statement_timeout = %q, %v; want 200ms", timeout, err)
	}
}
