package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/keyrotation"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// logLine is a JSON log line, its fields decoded.
type logLine map[string]any

// logLines decodes every line of a JSON log; a line that is not JSON fails
// the test.
func logLines(t *testing.T, log string) []logLine {
	t.Helper()
	var lines []logLine
	for line := range strings.Lines(log) {
		var l logLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("log line %q is not JSON: %v", line, err)
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// withMsg returns the lines whose msg is msg.
func withMsg(lines []logLine, msg string) []logLine {
	var out []logLine
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// duration reads a field written by the logger's duration rule.
func duration(t *testing.T, l logLine, field string) time.Duration {
	t.Helper()
	s, _ := l[field].(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Errorf("%s %q of %v is not a duration: %v", field, s, l, err)
	}
	return d
}

// TestCommandsLogTheSameService runs migrate, rotate-keys, doctor and serve
// under a fork's service name, given once in the environment as the
// template gives it: the first log line of each carries that name as
// service and its own name as command.
func TestCommandsLogTheSameService(t *testing.T) {
	t.Parallel()
	const service = "acme-fleet"
	env := map[string]string{"FLEET_MANAGER_SERVICE_NAME": service}
	cfg := pgtest.NewDatabase(t)
	key := keyFlag(t)
	first := map[string]logLine{}
	for _, args := range [][]string{{"migrate"}, {"rotate-keys", key}, append([]string{"doctor"}, lenient...)} {
		_, stderr, err := execute(t, env, append(args, dbFlags(cfg)...)...)
		// The doctor's verdict is the shared server's (its settings among
		// them), not what this test is about: a report of problems is fine.
		if err != nil && (args[0] != "doctor" || exitCode(err) != exitProblems) {
			t.Fatalf("%s = %v\n%s", args[0], err, stderr)
		}
		if lines := logLines(t, stderr); len(lines) > 0 {
			first[args[0]] = lines[0]
		}
	}
	ports := newServePorts(t)
	logs, stop := startServe(t, env, append(append(dbFlags(cfg), ports.flags()...), "--auth-dev-key-dir="+t.TempDir(), key)...)
	gomega.NewWithT(t).Eventually(logs.String).WithTimeout(20*time.Second).Should(gomega.ContainSubstring("\n"), "serve's first log line")
	if err := stop(); err != nil {
		t.Errorf("serve after shutdown = %v", err)
	}
	first["serve"] = logLines(t, logs.String())[0]

	for _, command := range []string{"migrate", "rotate-keys", "doctor", "serve"} {
		l, ok := first[command]
		if !ok {
			t.Errorf("%s logged nothing", command)
			continue
		}
		if l["service"] != service || l["command"] != command {
			t.Errorf("%s's first log line = %v, want service %s and command %s", command, l, service, command)
		}
	}
	// An invalid name is refused as serve refuses it, naming the flag.
	if _, _, err := execute(t, map[string]string{"FLEET_MANAGER_SERVICE_NAME": "Acme_Fleet"}, append([]string{"migrate"}, dbFlags(cfg)...)...); err == nil ||
		!strings.Contains(err.Error(), "service-name") {
		t.Errorf("migrate with service name Acme_Fleet = %v, want an error naming --service-name", err)
	}
}

// TestMigrateLogsItsProgress: on an empty database, migrate says how many
// migrations are pending, then logs each one done in order, with n of m
// and how long it took, then the total; a second run has nothing pending
// and logs no progress.
func TestMigrateLogsItsProgress(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	_, stderr, err := execute(t, nil, append([]string{"migrate"}, dbFlags(cfg)...)...)
	if err != nil {
		t.Fatalf("migrate = %v\n%s", err, stderr)
	}
	lines := logLines(t, stderr)
	ids := migrations.IDs()
	m := len(ids)
	if start := withMsg(lines, "applying migrations"); len(start) != 1 || start[0]["pending"] != float64(m) ||
		start[0]["first"] != ids[0] || start[0]["last"] != ids[m-1] {
		t.Errorf("applying migrations lines = %v, want one with pending %d, first %s, last %s", start, m, ids[0], ids[m-1])
	}
	done := withMsg(lines, "migration done")
	var got []string
	for i, l := range done {
		got = append(got, fmt.Sprint(l["id"]))
		if l["n"] != float64(i+1) || l["of"] != float64(m) {
			t.Errorf("migration done line %d = %v, want n %d of %d", i, l, i+1, m)
		}
		duration(t, l, "elapsed")
	}
	if !slices.Equal(got, ids) {
		t.Errorf("migration done ids = %v, want %v", got, ids)
	}
	if end := withMsg(lines, "migrations applied"); len(end) != 1 || end[0]["applied"] != float64(m) {
		t.Errorf("migrations applied lines = %v, want one with applied %d", end, m)
	} else {
		duration(t, end[0], "elapsed")
	}

	_, stderr, err = execute(t, nil, append([]string{"migrate"}, dbFlags(cfg)...)...)
	lines = logLines(t, stderr)
	if err != nil || len(withMsg(lines, "applying migrations")) != 0 || len(withMsg(lines, "migration done")) != 0 ||
		len(withMsg(lines, "migrations applied")) != 1 {
		t.Errorf("migrate again = %v, log %s; want only migrations applied", err, stderr)
	}
}

// TestRotateKeysLogsItsProgress rotates a hub's and two registrations'
// secrets one row a batch with --progress-interval=0: each column with
// values to rotate logs its start with the total, a progress line after
// each batch, its end, and the run its summary.
func TestRotateKeysLogsItsProgress(t *testing.T) {
	t.Parallel()
	db, cfg := pgtest.NewMigratedDatabase(t)
	a, b := keyFile(t, "a.key"), keyFile(t, "b.key")
	want := sealThroughStore(t, db, loadKeyring(t, a))
	args := append([]string{"rotate-keys", "--encryption-key-file=" + b, "--encryption-old-key-files=" + a, "--batch-size=1", "--progress-interval=0"},
		dbFlags(cfg)...)
	_, stderr, err := execute(t, nil, args...)
	if err != nil {
		t.Fatalf("rotate-keys = %v\n%s", err, stderr)
	}
	lines := logLines(t, stderr)
	column := func(l logLine) string { return fmt.Sprintf("%s.%s", l["table"], l["column"]) }
	totals := map[string]float64{}
	for _, l := range withMsg(lines, "rotating a column") {
		totals[column(l)] = l["total"].(float64)
	}
	if wantTotals := map[string]float64{"hubs.credentials": 1, "registrations.credentials": 2}; fmt.Sprint(totals) != fmt.Sprint(wantTotals) {
		t.Errorf("rotating a column totals = %v, want %v", totals, wantTotals)
	}
	progress := map[string][]string{}
	for _, l := range withMsg(lines, "rotating a column: progress") {
		progress[column(l)] = append(progress[column(l)], fmt.Sprintf("%v of %v", l["done"], l["of"]))
		duration(t, l, "elapsed")
	}
	if wantProgress := map[string][]string{"hubs.credentials": {"1 of 1"}, "registrations.credentials": {"1 of 2", "2 of 2"}}; fmt.Sprint(progress) != fmt.Sprint(wantProgress) {
		t.Errorf("progress lines = %v, want %v", progress, wantProgress)
	}
	ended := map[string]float64{}
	for _, l := range withMsg(lines, "column rotated") {
		ended[column(l)] = l["done"].(float64)
		duration(t, l, "elapsed")
	}
	if wantEnded := map[string]float64{"hubs.credentials": 1, "registrations.credentials": 2}; fmt.Sprint(ended) != fmt.Sprint(wantEnded) {
		t.Errorf("column rotated lines = %v, want %v", ended, wantEnded)
	}
	if end := withMsg(lines, "rotate-keys finished"); len(end) != 1 || end[0]["rotated"] != float64(len(want)) || end[0]["how"] != "re-wrapped" {
		t.Errorf("rotate-keys finished lines = %v, want one with rotated %d, re-wrapped", end, len(want))
	} else {
		duration(t, end[0], "elapsed")
	}
	if _, _, err := execute(t, nil, append([]string{"rotate-keys", "--encryption-key-file=" + b, "--progress-interval=-1s"}, dbFlags(cfg)...)...); err == nil ||
		!strings.Contains(err.Error(), "progress-interval") {
		t.Errorf("rotate-keys --progress-interval=-1s = %v, want an error naming the flag", err)
	}
}

// TestRotationLogKeepsToItsInterval: between a column's start and end,
// progress is logged after a batch only once the interval has passed since
// the last line; the start and end are always logged, a column with nothing
// to rotate not at all.
func TestRotationLogKeepsToItsInterval(t *testing.T) {
	t.Parallel()
	var out logtest.Buffer
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	l := &rotationLog{logger: config.Log{Format: "json", Level: "info"}.NewLogger(&out, "svc"), every: 10 * time.Second, now: func() time.Time { return now }}
	step := func(d time.Duration, p keyrotation.Progress) {
		now = now.Add(d)
		l.report(p)
	}
	p := keyrotation.Progress{Table: "hubs", Column: "credentials", Total: 5}
	step(0, p)
	for _, d := range []time.Duration{4 * time.Second, 5 * time.Second, 2 * time.Second, 3 * time.Second} {
		p.Done++
		step(d, p) // at 4s, 9s: not yet; 11s: logged; 14s: not yet
	}
	p.Done++
	p.Finished = true
	step(time.Second, p)
	step(0, keyrotation.Progress{Table: "dns_zones", Column: "credentials"})
	step(0, keyrotation.Progress{Table: "dns_zones", Column: "credentials", Finished: true})

	var got []string
	for _, line := range logLines(t, out.String()) {
		got = append(got, fmt.Sprintf("%s %s.%s done=%v elapsed=%v", line["msg"], line["table"], line["column"], line["done"], line["elapsed"]))
	}
	want := []string{
		"rotating a column hubs.credentials done=<nil> elapsed=<nil>",
		"rotating a column: progress hubs.credentials done=3 elapsed=11s",
		"column rotated hubs.credentials done=5 elapsed=15s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rotation log = %q, want %q", got, want)
	}
}
