package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// publishedOnHub makes an agent hub whose desired set is at revision, with
// ids published in it and waiting for the agent (due in five minutes, as a
// pass that published them asks).
func publishedOnHub(t *testing.T, db *gorm.DB, store *postgres.Store, name string, revision int, ids ...string) fleet.Hub {
	t.Helper()
	g := gomega.NewWithT(t)
	hub, err := store.CreateHub(context.Background(), fleet.HubCreate{Name: name, Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, AgentIdentity: name + "-agent", Capacity: 100})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, id := range ids {
		g.Expect(db.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation,
	next_attempt_at, hub_id, published_revision, published_generation)
VALUES (?, 'org-a', 'u', ?, 'eu', 'ocp', 'provisioning', 1, 1, now() + interval '5 minutes', ?, ?, 1)`, id, id, hub.ID, revision).Error).
			To(gomega.Succeed())
	}
	g.Expect(db.Exec(`UPDATE hubs SET revision = ?, placed_count = ? WHERE id = ?`, revision, len(ids), hub.ID).Error).To(gomega.Succeed())
	return hub
}

// wokenIDs returns the ids among ids that an acknowledgement queued: due
// now and marked woken_by_ack.
func wokenIDs(g *gomega.WithT, db *gorm.DB, ids ...string) []string {
	var woken []string
	g.Expect(db.Raw(`SELECT id FROM registrations WHERE id IN ? AND woken_by_ack AND next_attempt_at <= now() ORDER BY id`, ids).
		Scan(&woken).Error).To(gomega.Succeed())
	return woken
}

// revisions is how far a hub's agent applied its desired set, and how far
// the registrations that finished were woken.
type revisions struct{ Applied, Woken int64 }

func hubRevisions(g *gomega.WithT, db *gorm.DB, hubID string) revisions {
	var r revisions
	g.Expect(db.Raw(`SELECT applied_revision AS applied, woken_revision AS woken FROM hubs WHERE id = ?`, hubID).Scan(&r).Error).
		To(gomega.Succeed())
	return r
}

// TestAcknowledgedWakeUpHoldsNoHub holds one of the acknowledged
// registrations locked, as a pass recording its batch does, while the
// agent's heartbeat arrives. The heartbeat touches no registration: it
// answers at once. The wake-up of provisioning_mgr's pass
// (Queue.WakeAcknowledged) waits for the row without holding the hub's row,
// which every publication to the hub locks first; once the row is free it
// queues all three and records the revision it woke up to.
func TestAcknowledgedWakeUpHoldsNoHub(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	queue := postgres.NewQueue(store, postgres.DefaultQueueConfig())
	ids := []string{"pub-1", "pub-2", "pub-3"}
	hub := publishedOnHub(t, db.Gorm, store, "hub-a", 1, ids...)

	holder := db.Gorm.Begin()
	defer holder.Rollback()
	g.Expect(holder.Exec(`SELECT id FROM registrations WHERE id = 'pub-2' FOR UPDATE`).Error).To(gomega.Succeed())

	_, err := store.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: 1})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hubRevisions(g, db.Gorm, hub.ID)).To(gomega.Equal(revisions{Applied: 1}))

	woke := make(chan int, 1)
	go func() {
		n, _, err := queue.WakeAcknowledged(ctx, 100)
		if err != nil {
			n = -1
		}
		woke <- n
	}()
	g.Eventually(func() int {
		var waiting int
		g.Expect(db.Gorm.Raw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
	AND query LIKE '%woken_by_ack = true%'`).Scan(&waiting).Error).To(gomega.Succeed())
		return waiting
	}, 10*time.Second, 20*time.Millisecond).Should(gomega.Equal(1))
	// Meanwhile the hub's row is free: a publication would take it at once.
	g.Expect(db.Gorm.Transaction(func(tx *gorm.DB) error {
		return tx.Exec(`SELECT id FROM hubs WHERE id = ? FOR UPDATE NOWAIT`, hub.ID).Error
	})).To(gomega.Succeed())
	g.Expect(woke).NotTo(gomega.Receive())

	g.Expect(holder.Commit().Error).To(gomega.Succeed())
	g.Eventually(woke, 10*time.Second).Should(gomega.Receive(gomega.Equal(3)))
	g.Expect(wokenIDs(g, db.Gorm, ids...)).To(gomega.Equal(ids))
	g.Expect(hubRevisions(g, db.Gorm, hub.ID)).To(gomega.Equal(revisions{Applied: 1, Woken: 1}))
}

// TestWakeUpTakesOverWhereTheLastStopped plays a wake-up lost after its
// heartbeat committed (a crash between the two): the hub's agent applied
// revision 2, but only the acknowledgements up to revision 1 were woken.
// The next wake-up wakes what revision 2 published, and nothing of
// revision 1.
func TestWakeUpTakesOverWhereTheLastStopped(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	hub := publishedOnHub(t, db.Gorm, store, "hub-a", 2, "pub-2a", "pub-2b")
	g.Expect(db.Gorm.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation,
	next_attempt_at, hub_id, published_revision, published_generation)
VALUES ('pub-1', 'org-a', 'u', 'pub-1', 'eu', 'ocp', 'ready', 1, 1, now() + interval '1 hour', ?, 1, 1)`, hub.ID).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE hubs SET applied_revision = 2, woken_revision = 1 WHERE id = ?`, hub.ID).Error).To(gomega.Succeed())

	woken, more, err := postgres.NewQueue(store, postgres.DefaultQueueConfig()).WakeAcknowledged(ctx, 100)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(woken).To(gomega.Equal(2))
	g.Expect(more).To(gomega.BeFalse())
	g.Expect(wokenIDs(g, db.Gorm, "pub-1", "pub-2a", "pub-2b")).To(gomega.Equal([]string{"pub-2a", "pub-2b"}))
	g.Expect(hubRevisions(g, db.Gorm, hub.ID)).To(gomega.Equal(revisions{Applied: 2, Woken: 2}))
}

// TestAcknowledgementsAreWokenInBoundedBatches: one acknowledgement that
// finished more registrations than a batch (25 published in one revision,
// 10 in the next, 4 withdrawn of which 2 deregistered since) is woken a
// batch at a time: no call wakes more than its limit, more says whether
// some remain, every live row is woken exactly when its turn comes (none
// skipped within a revision split between batches), the deregistered are
// passed over, and the hub ends at the applied revision with no cursor.
func TestAcknowledgementsAreWokenInBoundedBatches(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	queue := postgres.NewQueue(store, postgres.DefaultQueueConfig())
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-a", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, AgentIdentity: "hub-a-agent", Capacity: 100})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, sql := range []string{
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at,
			hub_id, published_revision, published_generation)
		SELECT 'a-' || lpad(i::text, 2, '0'), 'org-a', 'u', 'a-' || i, 'eu', 'ocp', 'provisioning', 1, 1, now() + interval '5 minutes', ?,
			CASE WHEN i <= 25 THEN 1 ELSE 2 END, 1 FROM generate_series(1, 35) AS i`,
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at,
			hub_id, published_revision, published_generation, withdrawn_revision, deletion_requested_at, deleted_at)
		SELECT 'w-' || i, 'org-a', 'u', 'w-' || i, 'eu', 'ocp', 'deprovisioning', 2, 2, now() + interval '5 minutes', ?, 1, 1, 2, now(),
			CASE WHEN i > 2 THEN now() END FROM generate_series(1, 4) AS i`,
		`UPDATE hubs SET revision = 2, placed_count = 37 WHERE id = ?`,
	} {
		g.Expect(db.Gorm.Exec(sql, hub.ID).Error).To(gomega.Succeed(), sql)
	}
	_, err = store.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: 2})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	total, calls := 0, 0
	for more := true; more; calls++ {
		g.Expect(calls).To(gomega.BeNumerically("<", 10), "the wake-up never ends")
		var woken int
		woken, more, err = queue.WakeAcknowledged(ctx, 10)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(woken).To(gomega.BeNumerically("<=", 10))
		total += woken
		if more {
			g.Expect(countOf(g, db.Gorm, `SELECT count(*) FROM registrations WHERE woken_by_ack`)).To(gomega.Equal(total),
				"woken so far")
		}
	}
	g.Expect(total).To(gomega.Equal(37), "35 published, 2 withdrawn and live")
	g.Expect(countOf(g, db.Gorm, `SELECT count(*) FROM registrations WHERE woken_by_ack AND next_attempt_at <= now() AND deleted_at IS NULL`)).
		To(gomega.Equal(37))
	g.Expect(countOf(g, db.Gorm, `SELECT count(*) FROM registrations WHERE woken_by_ack AND deleted_at IS NOT NULL`)).To(gomega.BeZero())
	g.Expect(hubRevisions(g, db.Gorm, hub.ID)).To(gomega.Equal(revisions{Applied: 2, Woken: 2}))
	g.Expect(countOf(g, db.Gorm, `SELECT count(*) FROM hubs WHERE wake_cursor_revision IS NOT NULL OR wake_cursor_id IS NOT NULL`)).To(gomega.BeZero())
	woken, more, err := queue.WakeAcknowledged(ctx, 10)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect([]any{woken, more}).To(gomega.Equal([]any{0, false}), "nothing is left to wake")
}

func countOf(g *gomega.WithT, db *gorm.DB, sql string) int {
	var n int
	g.Expect(db.Raw(sql).Scan(&n).Error).To(gomega.Succeed(), sql)
	return n
}
