package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// change is what a test compares of a feed item: the name, and whether it
// is a tombstone.
type change struct {
	Name    string
	Deleted bool
}

func changes(p fleet.ChangePage) []change {
	out := []change{}
	for _, c := range p.Items {
		out = append(out, change{c.Cluster.Name, c.DeletedAt != nil})
	}
	return out
}

// feedEventually reads the feed until it returns want: a change is readable
// once every older transaction of the database has ended.
func (e *inventoryEnv) feedEventually(who fleet.Identity, admin bool, after string, size int, want ...change) fleet.ChangePage {
	e.t.Helper()
	var page fleet.ChangePage
	gomega.NewWithT(e.t).Eventually(func(g gomega.Gomega) {
		var err error
		page, err = e.store.ListManagedClusterChanges(context.Background(), who, admin, after, size)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(changes(page)).To(gomega.Equal(append([]change{}, want...)))
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.Succeed())
	return page
}

// purgeEventually purges a batch of tombstones older than seven days once
// it finds want of them: the purge takes a tombstone only once every older
// transaction of the database has ended.
func (e *inventoryEnv) purgeEventually(limit, want int) int {
	e.t.Helper()
	var n int
	gomega.NewWithT(e.t).Eventually(func() (int, error) {
		var err error
		n, err = e.store.PurgeTombstones(context.Background(), "managed_clusters", time.Now().Add(-7*24*time.Hour), limit)
		return n, err
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(want), "PurgeTombstones()")
	return n
}

func TestChangeFeedOrderAndResume(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	admin := fleet.Identity{OrgID: "ops"}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("a", "4.16"), cluster("b", "4.16")}})
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("c", "4.16")}})
	first := e.feedEventually(admin, true, "", 2, change{"a", false}, change{"b", false})
	rest := e.feedEventually(admin, true, first.Cursor, 10, change{"c", false})

	// A change moves the row to the end; an unchanged re-send does not.
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("a", "4.17"), cluster("c", "4.16")}})
	e.ingest(fleet.InventoryBatch{Deletes: []string{"b"}})
	next := e.feedEventually(admin, true, rest.Cursor, 10, change{"a", false}, change{"b", true})
	e.feedEventually(admin, true, next.Cursor, 10)

	// Revival is a change too, and so is a re-read from an older cursor.
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("b", "4.16")}})
	e.feedEventually(admin, true, next.Cursor, 10, change{"b", false})
	e.feedEventually(admin, true, first.Cursor, 10, change{"c", false}, change{"a", false}, change{"b", false})
}

func TestChangeFeedScopedLikeTheList(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	owned, err := e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-owned", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-owned", OwnerOrgID: "org-c"})
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := e.store.CreateRegistration(ctx, fleet.Identity{OrgID: "org-a", Username: "u"},
		fleet.RegistrationCreate{Name: "mine", Zone: "eu", Product: fleet.ProductOCP}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, e.hub.ID, reg.ID).Error; err != nil {
		t.Fatal(err)
	}
	linked := cluster("linked", "4")
	linked.Labels[fleet.LabelRegistrationID] = reg.ID
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked, cluster("unregistered", "4")}})
	if _, err := e.store.IngestInventory(ctx, owned.ID, "agent-owned", fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("customer", "4")}}); err != nil {
		t.Fatal(err)
	}
	e.feedEventually(fleet.Identity{OrgID: "ops"}, true, "", 10, change{"linked", false}, change{"unregistered", false}, change{"customer", false})
	e.feedEventually(fleet.Identity{OrgID: "org-a"}, false, "", 10, change{"linked", false})
	e.feedEventually(fleet.Identity{OrgID: "org-c"}, false, "", 10, change{"customer", false})
	quiet := e.feedEventually(fleet.Identity{OrgID: "org-b"}, false, "", 10)
	e.feedEventually(fleet.Identity{}, false, "", 10)

	// A caller that sees nothing still moves on: its cursor passes the
	// changes it may not see, so the purge of those does not expire it.
	if quiet.Cursor == "" {
		t.Fatalf("ListManagedClusterChanges(org-b) cursor is empty")
	}
	e.ingest(fleet.InventoryBatch{Deletes: []string{"linked"}})
	e.feedEventually(fleet.Identity{OrgID: "org-a"}, false, "", 10, change{"linked", true})
	e.feedEventually(fleet.Identity{OrgID: "org-b"}, false, quiet.Cursor, 10)
}

func TestChangeFeedRefusesBadAndExpiredCursors(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	admin := fleet.Identity{OrgID: "ops"}
	for _, bad := range []string{"not base64!", "MS4x", "Mi4xLjI", "MS54LjE"} {
		if _, err := e.store.ListManagedClusterChanges(ctx, admin, true, bad, 10); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
			t.Errorf("ListManagedClusterChanges(after %q) = %v, want CodeValidation", bad, err)
		}
	}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("a", "4"), cluster("b", "4"), cluster("c", "4")}})
	start := e.feedEventually(admin, true, "", 1, change{"a", false})
	list, err := e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	listCursor := list.Cursor
	e.ingest(fleet.InventoryBatch{Deletes: []string{"a"}})
	e.ingest(fleet.InventoryBatch{Deletes: []string{"b"}})
	gone := e.feedEventually(admin, true, start.Cursor, 10, change{"c", false}, change{"a", true}, change{"b", true})
	if err := e.db.Gorm.Exec(`UPDATE managed_clusters SET deleted_at = now() - interval '8 days' WHERE name = 'a'`).Error; err != nil {
		t.Fatal(err)
	}
	// The backdating is itself a change: read past it before purging.
	after := e.feedEventually(admin, true, gone.Cursor, 10, change{"a", true})
	e.purgeEventually(1000, 1)
	for _, old := range []string{"", start.Cursor, listCursor, gone.Cursor} {
		if _, err := e.store.ListManagedClusterChanges(ctx, admin, true, old, 10); fleet.ErrorCodeOf(err) != fleet.CodeCursorExpired {
			t.Errorf("ListManagedClusterChanges(after a cursor older than the purge) = %v, want CodeCursorExpired", err)
		}
	}
	e.feedEventually(admin, true, after.Cursor, 10)
	now, err := e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	e.feedEventually(admin, true, now.Cursor, 10)
}

func TestPurgeTombstonesInBatches(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	var batch []fleet.ManagedClusterSummary
	var doomed []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		batch = append(batch, cluster(n, "4"))
		doomed = append(doomed, n)
	}
	e.ingest(fleet.InventoryBatch{Upserts: append(batch, cluster("live", "4"), cluster("young", "4"))})
	e.ingest(fleet.InventoryBatch{Deletes: append(doomed, "young")})
	if err := e.db.Gorm.Exec(`UPDATE managed_clusters SET deleted_at = now() - interval '8 days' WHERE name IN ?`, doomed).Error; err != nil {
		t.Fatal(err)
	}
	var purgedSeq int64
	e.db.Gorm.Raw(`SELECT max(change_seq) FROM managed_clusters WHERE name IN ?`, doomed).Scan(&purgedSeq)
	cutoff := time.Now().Add(-7 * 24 * time.Hour)
	got := []int{e.purgeEventually(3, 3)}
	for got[len(got)-1] == 3 {
		n, err := e.store.PurgeTombstones(ctx, "managed_clusters", cutoff, 3)
		if err != nil {
			t.Fatalf("PurgeTombstones() = %v", err)
		}
		got = append(got, n)
	}
	if want := []int{3, 3, 1}; !gomega.NewWithT(t).Expect(got).To(gomega.Equal(want)) {
		t.Errorf("PurgeTombstones() batches = %v, want %v", got, want)
	}
	var left []string
	e.db.Gorm.Raw(`SELECT name FROM managed_clusters ORDER BY name`).Scan(&left)
	if !gomega.NewWithT(t).Expect(left).To(gomega.Equal([]string{"live", "young"})) {
		t.Errorf("rows after the purge = %v", left)
	}
	var horizon struct {
		Xid string
		Seq int64
	}
	e.db.Gorm.Raw(`SELECT h.change_xid::text AS xid, h.change_seq AS seq FROM inventory_purge_horizon h WHERE table_name = 'managed_clusters'`).Scan(&horizon)
	if horizon.Xid == "" || horizon.Seq != purgedSeq {
		t.Errorf("purge horizon = %+v, want the highest purged position (seq %d)", horizon, purgedSeq)
	}
	if _, err := e.store.PurgeTombstones(ctx, "registrations", cutoff, 3); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
		t.Errorf("PurgeTombstones(registrations) = %v, want CodeValidation", err)
	}
}

// TestDeletedHubsInventoryLeavesThroughTheFeed: deleting a hub tombstones
// what its agent reported, so a consumer of the feed sees each cluster gone
// and the purge removes them after the retention.
func TestDeletedHubsInventoryLeavesThroughTheFeed(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	admin := fleet.Identity{OrgID: "ops"}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("a", "4.16"), cluster("b", "4.16")}})
	_, err := e.store.IngestResources(context.Background(), e.hub.ID, "agent-1", fleet.ResourceBatch{Group: "cluster.open-cluster-management.io",
		Kind: "ManagedClusterSet", Generation: 1, Upserts: []fleet.ResourceObject{{Name: "default",
			Body: map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
				"metadata": map[string]any{"name": "default"}}}}})
	gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred())
	seen := e.feedEventually(admin, true, "", 10, change{"a", false}, change{"b", false})

	gomega.NewWithT(t).Expect(e.store.DeleteHub(context.Background(), e.hub.ID)).To(gomega.Succeed())
	// One statement tombstones both, in no particular order.
	gomega.NewWithT(t).Eventually(func() ([]change, error) {
		page, err := e.store.ListManagedClusterChanges(context.Background(), admin, true, seen.Cursor, 10)
		return changes(page), err
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.ConsistOf(change{"a", true}, change{"b", true}))
	gomega.NewWithT(t).Expect(countRows(t, e.db, `SELECT count(*) FROM resources WHERE hub_id = ? AND deleted_at IS NULL`, e.hub.ID)).
		To(gomega.Equal(0), "the deleted hub's resources are not tombstoned")
	gomega.NewWithT(t).Expect(countRows(t, e.db, `SELECT count(*) FROM managed_clusters WHERE hub_id = ? AND deleted_at IS NULL`, e.hub.ID)).
		To(gomega.Equal(0))
}
