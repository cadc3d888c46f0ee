package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/postgres/doctor"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// lenient are thresholds no other test's sessions on the shared server can
// pass, so that the doctor's verdict depends on the database under test.
var lenient = []string{"--long-transaction=24h", "--lock-wait=24h", "--max-connection-use=1", "--queue-oldest-due=24h",
	"--replication-lag=24h", "--slow-statement-mean=24h"}

// TestDoctorOnACurrentDatabase runs `doctor` on a migrated database of a
// server of its own, at PostgreSQL's default settings (the shared test
// server may run without autovacuum): the text report has every section
// and no problem, the JSON one parses with the schema current, and the
// command exits 0.
func TestDoctorOnACurrentDatabase(t *testing.T) {
	t.Parallel()
	cfg := pgtest.StartServer(t).NewDatabase(t, "doctor")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgtest.Open(t, cfg).Migrate(ctx); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	args := append(append([]string{"doctor"}, dbFlags(cfg)...), lenient...)
	stdout, stderr, err := execute(t, nil, args...)
	if err != nil {
		t.Fatalf("doctor = %v\n%s\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"== Schema: ok", "== Settings: ok", "autovacuum on, track_counts on", "== Connections: ok", "== Long transactions: ok", "== Lock waits: ok",
		"== Tables and indexes: ok", "== Replication: ok", "== Work queue: ok", "pg_stat_statements is not installed", "no problems found"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, stdout)
		}
	}

	stdout, _, err = execute(t, nil, append(args, "--output=json")...)
	if err != nil {
		t.Fatalf("doctor --output=json = %v", err)
	}
	var report struct {
		doctor.Report
		Problems []doctor.Finding `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("doctor --output=json wrote no JSON (%v):\n%s", err, stdout)
	}
	if report.Schema.State != "current" || report.Database != cfg.Name || len(report.Problems) != 0 {
		t.Errorf("doctor --output=json = schema %q, database %q, problems %v; want current, %s, none",
			report.Schema.State, report.Database, report.Problems, cfg.Name)
	}
	if len(report.Connections.ByApplication) == 0 || report.Queue.Kinds == nil {
		t.Errorf("doctor --output=json has no connections or queue: %s", stdout)
	}
}

// TestDoctorExitCodes runs `doctor` on a database no migration touched (a
// problem: exit 2, with the problems in the JSON) and on no database at all
// (exit 1).
func TestDoctorExitCodes(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	args := append(append([]string{"doctor", "--output=json"}, dbFlags(cfg)...), lenient...)
	stdout, _, err := execute(t, nil, args...)
	if got := exitCode(err); got != exitProblems {
		t.Errorf("doctor on an empty database = %v, exit code %d; want %d", err, got, exitProblems)
	}
	var report struct {
		Problems []doctor.Finding `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("doctor --output=json wrote no JSON (%v):\n%s", err, stdout)
	}
	checks := map[string]bool{}
	for _, p := range report.Problems {
		checks[p.Check] = true
	}
	if !checks["schema"] || !strings.Contains(stdout, "fleet-manager migrate") {
		t.Errorf("doctor on an empty database: problems %v, want the schema's naming `fleet-manager migrate`", report.Problems)
	}

	unreachable := append([]string{"doctor", "--db-host=127.0.0.1", "--db-port=" + strconv.Itoa(freePort(t)), "--db-connect-timeout=2s"}, lenient...)
	_, _, err = execute(t, nil, unreachable...)
	var found problemsFound
	if err == nil || errors.As(err, &found) || exitCode(err) != 1 {
		t.Errorf("doctor on no database = %v, exit code %d; want a failure with exit code 1", err, exitCode(err))
	}

	_, _, err = execute(t, nil, "doctor", "--output=yaml", "--top=0")
	if err == nil || !strings.Contains(err.Error(), "--output") || !strings.Contains(err.Error(), "--top") {
		t.Errorf("doctor --output=yaml --top=0 = %v, want both flags named", err)
	}
}
