package doctor_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/doctor"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// standbyEnv is a primary with a migrated database and a streaming standby
// of it.
type standbyEnv struct {
	t       testing.TB
	standby *pgtest.Server
	db      *postgres.DB
	dbName  string
	written int
}

func newStandbyEnv(t testing.TB) *standbyEnv {
	t.Helper()
	e := &standbyEnv{t: t, dbName: "fleet_doctor"}
	primary := pgtest.StartServer(t)
	e.db = pgtest.Open(t, primary.NewDatabase(t, e.dbName))
	if err := e.db.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate(): %v", err)
	}
	if err := e.db.Gorm.Exec(`CREATE TABLE doctor_writes (n int)`).Error; err != nil {
		t.Fatal(err)
	}
	e.standby = pgtest.StartServerWith(t, pgtest.ServerOptions{
		Init: func(s *pgtest.Server, dir string) error {
			out, err := s.Command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port()), "-U", "postgres",
				"-D", dir, "-R", "-X", "stream", "-c", "fast").CombinedOutput()
			if err != nil {
				return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
			}
			return nil
		},
		// A long read on the standby is not cancelled by the replay of a
		// vacuum on the primary.
		Settings: []string{"hot_standby_feedback=on"},
	})
	return e
}

// write commits n rows on the primary, one transaction.
func (e *standbyEnv) write(n int) {
	e.t.Helper()
	if err := e.db.Gorm.Exec(`INSERT INTO doctor_writes SELECT generate_series(?::int, ?::int)`, e.written+1, e.written+n).Error; err != nil {
		e.t.Fatalf("writing %d rows: %v", n, err)
	}
	e.written += n
}

// standbyHas waits until the standby's copy holds every row written.
func (e *standbyEnv) standbyHas() {
	e.t.Helper()
	standby := e.standbyDB()
	defer standby.Close()
	gomega.NewWithT(e.t).Eventually(func() (int, error) {
		var n int
		return n, standby.Gorm.Raw(`SELECT count(*) FROM doctor_writes`).Scan(&n).Error
	}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(gomega.Equal(e.written), "rows replayed on the standby")
}

// standbyDB opens a pool on the standby's copy of the database.
func (e *standbyEnv) standbyDB() *postgres.DB {
	e.t.Helper()
	cfg := e.standby.Config()
	cfg.Name = e.dbName
	return pgtest.Open(e.t, cfg)
}

// standbySQL runs a statement on the standby's copy of the database.
func (e *standbyEnv) standbySQL(sql string) {
	e.t.Helper()
	db := e.standbyDB()
	defer db.Close()
	if err := db.Gorm.Exec(sql).Error; err != nil {
		e.t.Fatalf("standby: %s: %v", sql, err)
	}
}

// TestDoctorReportsAStandbyBehind runs the doctor's replication check on a
// real primary and its streaming standby, with the standby's replay paused
// while the primary writes: the primary lists the standby with the WAL it
// has not replayed and an inactive slot as a problem; the standby reports
// itself behind past the threshold.
func TestDoctorReportsAStandbyBehind(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newStandbyEnv(t)
	g.Expect(e.db.Gorm.Exec(`SELECT pg_create_physical_replication_slot('doctor_unused')`).Error).To(gomega.Succeed())
	// A commit replayed before the pause: a standby measures its lag from
	// the last one it replayed, and has none to measure from before.
	e.write(1)
	e.standbyHas()
	e.standbySQL("SELECT pg_wal_replay_pause()")
	e.write(50)

	cfg := doctor.DefaultConfig()
	cfg.ReplicationLag = 200 * time.Millisecond
	var primary doctor.Report
	g.Eventually(func(g gomega.Gomega) {
		var err error
		primary, err = doctor.Run(ctx, e.db, cfg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(primary.Replication.Replicas).To(gomega.HaveLen(1))
		g.Expect(primary.Replication.Replicas[0].ReplayLagBytes).NotTo(gomega.BeNil())
		g.Expect(*primary.Replication.Replicas[0].ReplayLagBytes).To(gomega.BeNumerically(">", 0), "WAL the paused standby has not replayed")
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(primary.Replication.Role).To(gomega.Equal("primary"))
	g.Expect(primary.Replication.Replicas[0].State).To(gomega.Equal("streaming"))
	g.Expect(strings.Join(primary.Replication.Problems, "\n")).To(gomega.ContainSubstring("replication slot doctor_unused is inactive"))

	standby := e.standbyDB()
	var behind doctor.Report
	g.Eventually(func(g gomega.Gomega) {
		var err error
		behind, err = doctor.Run(ctx, standby, cfg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(behind.Replication.Problems).NotTo(gomega.BeEmpty(), "the paused standby past the threshold")
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(behind.Replication.Role).To(gomega.Equal("standby"))
	g.Expect(*behind.Replication.StandbyReplayLagBytes).To(gomega.BeNumerically(">", 0))
	g.Expect(behind.Replication.Problems[0]).To(gomega.ContainSubstring("this standby replays"))
	g.Expect(behind.Schema.State).To(gomega.Equal("current"), "the schema read on the standby")
}
