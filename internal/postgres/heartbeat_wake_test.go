package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
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

// TestHeartbeatWakesWithoutHoldingTheHub holds one of the acknowledged
// registrations locked, as a pass recording its batch does, while the
// agent's heartbeat arrives. The heartbeat's report commits, and its
// wake-up waits for the row without holding the hub's row, which every
// publication to the hub locks first; once the row is free the wake-up
// queues all three and records the revision it woke up to.
func TestHeartbeatWakesWithoutHoldingTheHub(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	ids := []string{"pub-1", "pub-2", "pub-3"}
	hub := publishedOnHub(t, db.Gorm, store, "hub-a", 1, ids...)

	holder := db.Gorm.Begin()
	defer holder.Rollback()
	g.Expect(holder.Exec(`SELECT id FROM registrations WHERE id = 'pub-2' FOR UPDATE`).Error).To(gomega.Succeed())

	answered := make(chan error, 1)
	go func() {
		_, err := store.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: 1})
		answered <- err
	}()
	// The report is committed and the wake-up waits for pub-2.
	g.Eventually(func() revisions { return hubRevisions(g, db.Gorm, hub.ID) }, 10*time.Second, 20*time.Millisecond).
		Should(gomega.Equal(revisions{Applied: 1}))
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
	g.Expect(answered).NotTo(gomega.Receive())

	g.Expect(holder.Commit().Error).To(gomega.Succeed())
	g.Eventually(answered, 10*time.Second).Should(gomega.Receive(gomega.BeNil()))
	g.Expect(wokenIDs(g, db.Gorm, ids...)).To(gomega.Equal(ids))
	g.Expect(hubRevisions(g, db.Gorm, hub.ID)).To(gomega.Equal(revisions{Applied: 1, Woken: 1}))
}

// TestHeartbeatWakesWhatAnEarlierOneLeft plays a wake-up lost after its
// heartbeat committed (a crash between the two): the hub's agent applied
// revision 2, but only the acknowledgements up to revision 1 were woken.
// The next heartbeat, which acknowledges nothing new, wakes what revision 2
// published, and nothing of revision 1.
func TestHeartbeatWakesWhatAnEarlierOneLeft(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	hub := publishedOnHub(t, db.Gorm, store, "hub-a", 2, "pub-2a", "pub-2b")
	g.Expect(db.Gorm.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation,
	next_attempt_at, hub_id, published_revision, published_generation)
VALUES ('pub-1', 'org-a', 'u', 'pub-1', 'eu', 'ocp', 'ready', 1, 1, now() + interval '1 hour', ?, 1, 1)`, hub.ID).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE hubs SET applied_revision = 2, woken_revision = 1 WHERE id = ?`, hub.ID).Error).To(gomega.Succeed())

	_, err := store.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: 2})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(wokenIDs(g, db.Gorm, "pub-1", "pub-2a", "pub-2b")).To(gomega.Equal([]string{"pub-2a", "pub-2b"}))
	g.Expect(hubRevisions(g, db.Gorm, hub.ID)).To(gomega.Equal(revisions{Applied: 2, Woken: 2}))
}
