package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// TestStatsAgreeWithTheRows checks the fleet gauges against counts of the
// rows: the phases of the live registrations (summed from the counters) and
// the due registrations of each kind, then a backlog larger than
// QueueDepthBound, reported as the bound.
func TestStatsAgreeWithTheRows(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	store, db := newStoreOn(t, nil)
	ctx := context.Background()
	seedRegistrations(t, db, "org-1", "c-", 700)
	seedRegistrations(t, db, "org-2", "c-", 90)
	exec := func(sql string) {
		t.Helper()
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	exec(`UPDATE registrations SET next_attempt_at = now() - interval '1 minute' WHERE phase IN ('accepted', 'provisioning')`)
	exec(`UPDATE registrations SET next_attempt_at = now() + interval '1 hour' WHERE phase = 'failed'`)
	exec(`UPDATE registrations SET deletion_requested_at = now(), phase = 'deprovisioning', next_attempt_at = now() - interval '1 second'
		WHERE name LIKE 'c-0001%' AND deleted_at IS NULL`)

	check := func(when string) {
		t.Helper()
		stats, err := store.Stats(ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred(), when)
		var want []struct {
			Phase string
			N     int
		}
		g.Expect(db.Gorm.Raw(`SELECT phase, count(*) AS n FROM registrations WHERE deleted_at IS NULL GROUP BY phase`).Scan(&want).Error).To(gomega.Succeed())
		phases := map[fleet.Phase]int{}
		for _, p := range want {
			phases[fleet.Phase(p.Phase)] = p.N
		}
		g.Expect(stats.Phases).To(gomega.Equal(phases), "%s: Stats().Phases", when)
		due := `SELECT count(*) FROM registrations WHERE deleted_at IS NULL AND next_attempt_at <= now() AND deletion_requested_at IS `
		provision, deprovision := countRows(t, db, due+"NULL"), countRows(t, db, due+"NOT NULL")
		if provision+deprovision > postgres.QueueDepthBound {
			g.Expect(stats.QueueDepth[fleet.WorkProvision]+stats.QueueDepth[fleet.WorkDeprovision]).To(gomega.Equal(postgres.QueueDepthBound),
				"%s: Stats().QueueDepth = %v; %d and %d are due", when, stats.QueueDepth, provision, deprovision)
			return
		}
		g.Expect(provision).To(gomega.BeNumerically(">", 0))
		g.Expect(deprovision).To(gomega.BeNumerically(">", 0))
		g.Expect(stats.QueueDepth).To(gomega.Equal(map[fleet.WorkKind]int{fleet.WorkProvision: provision, fleet.WorkDeprovision: deprovision}),
			"%s: Stats().QueueDepth", when)
	}
	check("a few due")
	seedRegistrations(t, db, "org-3", "c-", postgres.QueueDepthBound)
	exec(`UPDATE registrations SET next_attempt_at = now() - interval '1 minute' WHERE org_id = 'org-3'`)
	check("more due than the bound")
}
