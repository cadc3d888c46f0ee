package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

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
	e := newReplicaEnv(t, replicaBound)
	g.Expect(e.db.Gorm.Exec(`SELECT pg_create_physical_replication_slot('doctor_unused')`).Error).To(gomega.Succeed())
	// A commit replayed before the pause: a standby measures its lag from
	// the last one it replayed, and has none to measure from before.
	e.ingest(1)
	e.replicaAnswers(1)
	e.standbySQL("SELECT pg_wal_replay_pause()")
	e.ingest(50)

	cfg := postgres.DefaultDoctorConfig()
	cfg.ReplicationLag = 200 * time.Millisecond
	var primary postgres.Report
	g.Eventually(func(g gomega.Gomega) {
		var err error
		primary, err = e.db.Doctor(ctx, cfg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(primary.Replication.Replicas).To(gomega.HaveLen(1))
		g.Expect(primary.Replication.Replicas[0].ReplayLagBytes).NotTo(gomega.BeNil())
		g.Expect(*primary.Replication.Replicas[0].ReplayLagBytes).To(gomega.BeNumerically(">", 0), "WAL the paused standby has not replayed")
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(primary.Replication.Role).To(gomega.Equal("primary"))
	g.Expect(primary.Replication.Replicas[0].State).To(gomega.Equal("streaming"))
	g.Expect(strings.Join(primary.Replication.Problems, "\n")).To(gomega.ContainSubstring("replication slot doctor_unused is inactive"))

	standby := e.standbyDB()
	var behind postgres.Report
	g.Eventually(func(g gomega.Gomega) {
		var err error
		behind, err = standby.Doctor(ctx, cfg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(behind.Replication.Problems).NotTo(gomega.BeEmpty(), "the paused standby past the threshold")
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(behind.Replication.Role).To(gomega.Equal("standby"))
	g.Expect(*behind.Replication.StandbyReplayLagBytes).To(gomega.BeNumerically(">", 0))
	g.Expect(behind.Replication.Problems[0]).To(gomega.ContainSubstring("this standby replays"))
	g.Expect(behind.Schema.State).To(gomega.Equal("current"), "the schema read on the standby")
}
