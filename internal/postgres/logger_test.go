package postgres_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// loggedStore is a store on a fresh migrated database whose statements log
// to the returned buffer, as JSON, from the debug level up.
func loggedStore(t *testing.T) (*postgres.Store, *postgres.DB, *logtest.Buffer) {
	t.Helper()
	_, cfg := pgtest.NewMigratedDatabase(t)
	// No slow-statement warnings: the test reads what a failure logs, on a
	// machine whose load it does not control.
	cfg.SlowThreshold = 0
	var buf logtest.Buffer
	db, err := postgres.Open(cfg, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	return store, db, &buf
}

// logLines parses the buffer's JSON lines.
func logLines(t *testing.T, buf *logtest.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestCallerRefusalsAreNotLoggedAsSQLFailures: a create the database refuses
// on a unique index is the caller's conflict (409), and a value PostgreSQL
// cannot store the caller's bad input (400); neither is a failure of the
// service, so neither logs at ERROR, and no line carries the statement or
// the caller's values. A statement that fails for the service's own fault
// still logs at ERROR.
func TestCallerRefusalsAreNotLoggedAsSQLFailures(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	store, db, buf := loggedStore(t)
	ctx := context.Background()
	caller := fleet.Identity{OrgID: "org-tenant-value", Username: "user-tenant-value"}
	create := fleet.PolicyCreate{Zone: "eu", Body: policyBody("name-tenant-value", "inform")}

	_, err := store.CreatePolicy(ctx, caller, create)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = store.CreatePolicy(ctx, caller, create)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNameTaken))
	err = db.Gorm.WithContext(ctx).Exec("SELECT ?::text", "nul\x00tenant-value").Error
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeValidation))

	refused := 0
	for _, line := range logLines(t, buf) {
		g.Expect(line["level"]).NotTo(gomega.Equal("ERROR"), "a caller's refusal logged as an error: %v", line)
		text, _ := json.Marshal(line)
		g.Expect(strings.ToUpper(string(text))).NotTo(gomega.ContainSubstring("INSERT"), "a line carries the statement: %s", text)
		g.Expect(string(text)).NotTo(gomega.ContainSubstring("tenant-value"), "a line carries the caller's values: %s", text)
		if line["msg"] == "sql refused" {
			refused++
		}
	}
	g.Expect(refused).To(gomega.Equal(2), "each refusal logs one line below ERROR:\n%s", buf.String())

	// The service's own fault still logs, with its statement.
	err = db.Gorm.WithContext(ctx).Exec("SELECT * FROM no_such_table").Error
	g.Expect(err).To(gomega.HaveOccurred())
	var failed []map[string]any
	for _, line := range logLines(t, buf) {
		if line["level"] == "ERROR" {
			failed = append(failed, line)
		}
	}
	g.Expect(failed).To(gomega.HaveLen(1), buf.String())
	g.Expect(failed[0]["msg"]).To(gomega.Equal("sql failed"))
	g.Expect(failed[0]["sql"]).To(gomega.ContainSubstring("no_such_table"))
}
