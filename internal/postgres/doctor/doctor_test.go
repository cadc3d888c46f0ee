package doctor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres/doctor"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestDoctorNamesALongTransactionAndTheLockWaitBehindIt runs the doctor on a
// server of its own with pg_stat_statements preloaded, on a migrated
// database where one session holds a lock in a long transaction and another
// waits for it, and reads the report: it names both sessions by their
// application_name, the waiting statement by its operation, and finds the
// schema current, the statistics installed and the queues empty.
func TestDoctorNamesALongTransactionAndTheLockWaitBehindIt(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	server := pgtest.StartServerWith(t, pgtest.ServerOptions{Settings: []string{"shared_preload_libraries=pg_stat_statements"}})
	cfg := server.NewDatabase(t, "doctor")
	cfg.MaxOpenConns, cfg.MaxIdleConns = 2, 2
	cfg.ApplicationName, cfg.LockTimeout = "fleet-manager/doctor", 5*time.Second
	db := pgtest.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g.Expect(db.Migrate(ctx)).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`CREATE EXTENSION pg_stat_statements`).Error).To(gomega.Succeed())

	holderCfg, waiterCfg := cfg, cfg
	holderCfg.ApplicationName, waiterCfg.ApplicationName = "fleet-manager/test-holder", "fleet-manager/test-waiter"
	holderCfg.LockTimeout, waiterCfg.LockTimeout = 0, 0
	holder := pgtest.Open(t, holderCfg).Gorm.WithContext(fleet.NewContextWithOperation(ctx, "migrate")).Begin()
	t.Cleanup(func() { holder.Rollback() })
	g.Expect(holder.Exec(`LOCK TABLE hubs IN ACCESS EXCLUSIVE MODE`).Error).To(gomega.Succeed())
	waiter := pgtest.Open(t, waiterCfg)
	waited := make(chan error, 1)
	go func() {
		var n int
		waited <- waiter.Gorm.WithContext(fleet.NewContextWithOperation(ctx, "listHubs")).Raw(`SELECT count(*) FROM hubs`).Scan(&n).Error
	}()

	thresholds := doctor.DefaultConfig()
	thresholds.LongTransaction, thresholds.LockWait = 200*time.Millisecond, 200*time.Millisecond
	var report doctor.Report
	g.Eventually(func(g gomega.Gomega) {
		var err error
		report, err = doctor.Run(ctx, db, thresholds)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(report.LockWaits.Problems).NotTo(gomega.BeEmpty(), "lock wait problems")
		g.Expect(report.Transactions.Problems).NotTo(gomega.BeEmpty(), "long transaction problems")
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())

	g.Expect(report.Schema.State).To(gomega.Equal("current"))
	g.Expect(report.Schema.Applied).To(gomega.Equal(len(migrations.IDs())))
	g.Expect(report.Schema.Problems).To(gomega.BeEmpty())

	g.Expect(report.Transactions.Long).To(gomega.ContainElement(gomega.SatisfyAll(
		gomega.HaveField("ApplicationName", holderCfg.ApplicationName),
		gomega.HaveField("Query", "/* op=migrate */ LOCK TABLE hubs IN ACCESS EXCLUSIVE MODE"))))
	g.Expect(report.LockWaits.Waits).To(gomega.ContainElement(gomega.SatisfyAll(
		gomega.HaveField("Waiting.ApplicationName", waiterCfg.ApplicationName),
		gomega.HaveField("Waiting.Query", "/* op=listHubs */ SELECT count(*) FROM hubs"),
		gomega.HaveField("Waiting.WaitEvent", "Lock:relation"),
		gomega.HaveField("Blocking.ApplicationName", holderCfg.ApplicationName))))
	g.Expect(strings.Join(report.LockWaits.Problems, "\n")).To(gomega.ContainSubstring(holderCfg.ApplicationName))

	apps := map[string]int{}
	for _, c := range report.Connections.ByApplication {
		apps[c.ApplicationName] += c.Count
	}
	g.Expect(apps).To(gomega.HaveKey(holderCfg.ApplicationName))
	g.Expect(apps).To(gomega.HaveKey(waiterCfg.ApplicationName))
	g.Expect(report.Connections.Max).To(gomega.Equal(200))
	g.Expect(report.Connections.Problems).To(gomega.BeEmpty())

	g.Expect(report.Tables.Locked).To(gomega.Equal([]string{"public.hubs"}), "tables held in ACCESS EXCLUSIVE mode")
	g.Expect(report.Tables.Tables).NotTo(gomega.BeEmpty())
	g.Expect(report.Tables.DatabaseBytes).To(gomega.BeNumerically(">", 0))
	g.Expect(report.Replication.Role).To(gomega.Equal("primary"))
	g.Expect(report.Replication.Problems).To(gomega.BeEmpty())
	g.Expect(report.Queue.Kinds).To(gomega.HaveLen(3))
	g.Expect(report.Queue.Problems).To(gomega.BeEmpty())
	g.Expect(report.Statements.Installed).To(gomega.BeTrue())
	g.Expect(report.Statements.Note).To(gomega.BeEmpty())
	g.Expect(report.Statements.Top).NotTo(gomega.BeEmpty())

	b, err := json.Marshal(report)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var decoded doctor.Report
	g.Expect(json.Unmarshal(b, &decoded)).To(gomega.Succeed())
	g.Expect(decoded.LockWaits.Waits).To(gomega.HaveLen(len(report.LockWaits.Waits)))

	g.Expect(holder.Rollback().Error).To(gomega.Succeed())
	g.Eventually(waited).WithTimeout(10 * time.Second).Should(gomega.Receive(gomega.BeNil()))
}

// TestDoctorSaysWhenStatementStatisticsAreMissing runs the doctor on a
// database without pg_stat_statements: the section says how to install it
// and counts no problem.
func TestDoctorSaysWhenStatementStatisticsAreMissing(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	report, err := doctor.Run(context.Background(), db, doctor.DefaultConfig())
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if report.Statements.Installed || !strings.Contains(report.Statements.Note, "shared_preload_libraries") {
		t.Errorf("Run().Statements = %+v, want not installed with a note on shared_preload_libraries", report.Statements)
	}
	if len(report.Statements.Problems) != 0 {
		t.Errorf("Run().Statements.Problems = %v, want none", report.Statements.Problems)
	}
	if report.Schema.State != "current" {
		t.Errorf("Run().Schema.State = %q, want current", report.Schema.State)
	}
}

// TestDoctorFindsWorkWaitingTooLong makes a registration due long ago and
// reads the queue's problem.
func TestDoctorFindsWorkWaitingTooLong(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	g := gomega.NewWithT(t)
	g.Expect(db.Gorm.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, next_attempt_at)
VALUES (gen_random_uuid()::text, 'org', 'owner', 'late', 'zone-a', 'ocp', 'accepted', now() - interval '1 hour')`).Error).To(gomega.Succeed())
	thresholds := doctor.DefaultConfig()
	report, err := doctor.Run(context.Background(), db, thresholds)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(report.Queue.Kinds).To(gomega.ContainElement(gomega.SatisfyAll(
		gomega.HaveField("Kind", "provision"), gomega.HaveField("Due", int64(1)),
		gomega.HaveField("OldestDueSeconds", gomega.HaveValue(gomega.BeNumerically(">", 3500.0))))))
	g.Expect(report.Queue.Problems).To(gomega.ConsistOf(gomega.ContainSubstring("provision work: 1 items due")))
}

// TestDoctorReportsSettingsThatBreakTheService runs the doctor on a server
// of its own with autovacuum and track_counts off and, for the doctor's
// role in its database, timeouts that cut the service's work: each is a
// problem that says how to fix it. On a server at PostgreSQL's defaults the
// same check finds none.
func TestDoctorReportsSettingsThatBreakTheService(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	good := pgtest.StartServer(t)
	goodCfg := good.NewDatabase(t, "doctor")
	goodCfg.StatementTimeout, goodCfg.IdleInTransactionTimeout = 0, 0
	report, err := doctor.Run(ctx, pgtest.Open(t, goodCfg), doctor.DefaultConfig())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(report.Settings.Problems).To(gomega.BeEmpty(), "a server at PostgreSQL's defaults")
	g.Expect(report.Settings.Autovacuum).To(gomega.BeTrue())
	g.Expect(report.Settings.TrackCounts).To(gomega.BeTrue())

	bad := pgtest.StartServerWith(t, pgtest.ServerOptions{Settings: []string{"autovacuum=off", "track_counts=off"}})
	cfg := bad.NewDatabase(t, "doctor")
	cfg.StatementTimeout, cfg.IdleInTransactionTimeout = 0, 0
	admin := pgtest.Open(t, cfg)
	for _, set := range []string{"statement_timeout = '2s'", "idle_in_transaction_session_timeout = '5s'", "idle_session_timeout = '10min'"} {
		g.Expect(admin.Gorm.Exec(`ALTER ROLE ` + cfg.User + ` IN DATABASE doctor SET ` + set).Error).To(gomega.Succeed())
	}
	report, err = doctor.Run(ctx, pgtest.Open(t, cfg), doctor.DefaultConfig())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(report.Settings.Autovacuum).To(gomega.BeFalse())
	g.Expect(report.Settings.StatementTimeoutSeconds).To(gomega.Equal(2.0))
	g.Expect(report.Settings.IdleSessionTimeoutSeconds).To(gomega.Equal(600.0))
	g.Expect(report.Settings.Problems).To(gomega.ConsistOf(
		gomega.And(gomega.HavePrefix("autovacuum is off"), gomega.ContainSubstring("ALTER SYSTEM SET autovacuum = on")),
		gomega.And(gomega.HavePrefix("track_counts is off"), gomega.ContainSubstring("ALTER SYSTEM SET track_counts = on")),
		gomega.And(gomega.HavePrefix("statement_timeout is 2s"), gomega.ContainSubstring(`IN DATABASE "doctor" SET statement_timeout = 0`)),
		gomega.And(gomega.HavePrefix("idle_in_transaction_session_timeout is 5s"),
			gomega.ContainSubstring(`IN DATABASE "doctor" SET idle_in_transaction_session_timeout = 0`)),
		gomega.And(gomega.HavePrefix("idle_session_timeout is 10m0s"), gomega.ContainSubstring(`IN DATABASE "doctor" SET idle_session_timeout = 0`)),
	))
	g.Expect(report.Problems()).To(gomega.ContainElement(doctor.Finding{Check: "settings", Problem: report.Settings.Problems[0]}))
}
