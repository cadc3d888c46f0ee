package postgres_test

import (
	"context"
	"crypto/rand"
	"sort"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// TestFullResyncSurvivesACrashBetweenBatches cuts a hub's full resync
// between its batches with a crash of PostgreSQL (an immediate shutdown:
// no checkpoint, recovery from the WAL at the next start, unlogged tables
// emptied) and lets the agent go on with its last batch once the server is
// back: the last batch tombstones only the cluster
// the hub no longer has, not those the batches before the crash reported.
// That holds because inventory_sync, where a resync keeps the names its
// batches reported, is a logged table; unlogged, the crash would empty it.
func TestFullResyncSurvivesACrashBetweenBatches(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	srv := pgtest.StartServer(t)
	cfg := srv.NewDatabase(t, "resync_crash")
	cfg.ConnectTimeout = 2 * time.Second
	db := pgtest.Open(t, cfg)
	ctx := context.Background()
	g.Expect(db.Migrate(ctx)).To(gomega.Succeed())
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyring, err := secrets.NewKeyring(key)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	store := postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-1", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-1"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ingest := func(b fleet.InventoryBatch) fleet.InventoryResult {
		t.Helper()
		// The agent retries a batch until the fleet manager answers; so does
		// this test, while the server recovers.
		var res fleet.InventoryResult
		g.Eventually(func() error {
			var err error
			res, err = store.IngestInventory(ctx, hub.ID, "agent-1", b)
			return err
		}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Succeed())
		return res
	}
	live := func() []string {
		t.Helper()
		var names []string
		g.Expect(db.Gorm.Raw(`SELECT name FROM managed_clusters WHERE hub_id = ? AND deleted_at IS NULL`, hub.ID).
			Scan(&names).Error).To(gomega.Succeed())
		sort.Strings(names)
		return names
	}

	// A complete resync: the hub has a, b, c and d.
	ingest(fleet.InventoryBatch{Generation: 1, Full: true, Last: true,
		Upserts: []fleet.ManagedClusterSummary{cluster("a", "4"), cluster("b", "4"), cluster("c", "4"), cluster("d", "4")}})
	g.Expect(live()).To(gomega.Equal([]string{"a", "b", "c", "d"}))

	// The next resync: d is gone from the hub. Its first batch reports a and
	// b, then the server crashes before the second.
	ingest(fleet.InventoryBatch{Generation: 2, Full: true, Upserts: []fleet.ManagedClusterSummary{cluster("a", "4"), cluster("b", "4")}})
	srv.Restart(true)
	res := ingest(fleet.InventoryBatch{Generation: 2, Full: true, Last: true, Upserts: []fleet.ManagedClusterSummary{cluster("c", "4")}})
	g.Expect(res.Tombstoned).To(gomega.Equal(1), "only d, which the hub no longer has")
	g.Expect(live()).To(gomega.Equal([]string{"a", "b", "c"}), "what the batch before the crash reported is kept")
}
