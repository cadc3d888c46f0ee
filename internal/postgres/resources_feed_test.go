package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// resourceChanges is what a test compares of a kind's feed: the keys, and
// whether each is a tombstone.
func resourceChanges(p fleet.ResourceChangePage) []change {
	out := []change{}
	for _, c := range p.Items {
		out = append(out, change{fleet.ResourceKey(c.Resource.Namespace, c.Resource.Name), c.DeletedAt != nil})
	}
	return out
}

// findKind returns the registry's kind, failing the test when there is none.
func findKind(t *testing.T, name string) fleet.ResourceKind {
	t.Helper()
	k, ok := fleet.FindResourceKind(name)
	if !ok {
		t.Fatalf("FindResourceKind(%s): no such kind", name)
	}
	return k
}

// resourceFeedEventually reads kind's feed with store until it returns want:
// a change is readable once every older transaction of the database has
// ended.
func (e *inventoryEnv) resourceFeedEventually(store *postgres.Store, kind fleet.ResourceKind, hubID, after string, size int,
	want ...change) fleet.ResourceChangePage {
	e.t.Helper()
	var page fleet.ResourceChangePage
	gomega.NewWithT(e.t).Eventually(func(g gomega.Gomega) {
		var err error
		page, err = store.ListResourceChanges(context.Background(), kind, hubID, after, size)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resourceChanges(page)).To(gomega.Equal(append([]change{}, want...)))
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.Succeed())
	return page
}

func TestResourceFeedOrderAndResume(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	policy := findKind(t, "Policy")
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{policyObject("ns", "a", "inform"), policyObject("ns", "b", "inform")}})
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{policyObject("ns", "c", "inform")}})
	first := e.resourceFeedEventually(e.store, policy, "", "", 2, change{"ns/a", false}, change{"ns/b", false})
	rest := e.resourceFeedEventually(e.store, policy, "", first.Cursor, 10, change{"ns/c", false})

	// A change moves the object to the end; an unchanged re-send does not;
	// a delete is a tombstone.
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{policyObject("ns", "a", "enforce"), policyObject("ns", "c", "inform")}})
	e.ingestResources(fleet.ResourceBatch{Deletes: []string{"ns/b"}})
	next := e.resourceFeedEventually(e.store, policy, "", rest.Cursor, 10, change{"ns/a", false}, change{"ns/b", true})
	e.resourceFeedEventually(e.store, policy, "", next.Cursor, 10)

	// A full resync's tombstones and a revival are changes too, and so is
	// a re-read from an older cursor.
	e.ingestResources(fleet.ResourceBatch{Generation: 2, Full: true, Last: true, Upserts: []fleet.ResourceObject{policyObject("ns", "b", "inform")},
		Present: []fleet.PresentCluster{{Name: "ns/a", ContentHash: fleet.ResourceContentHash(policyObject("ns", "a", "enforce").Body)}}})
	e.resourceFeedEventually(e.store, policy, "", next.Cursor, 10, change{"ns/b", false}, change{"ns/c", true})
	e.resourceFeedEventually(e.store, policy, "", first.Cursor, 10, change{"ns/a", false}, change{"ns/b", false}, change{"ns/c", true})
	page := e.resourceFeedEventually(e.store, policy, "", "", 1, change{"ns/a", false})
	if got := page.Items[0].Resource; got.Hub.ID != e.hub.ID || got.Hub.Name != "hub-1" || got.Body["spec"] == nil {
		t.Errorf("ListResourceChanges() item = %+v, want the object with its hub and body", got)
	}
}

func TestResourceFeedScopedByKindHubAndZone(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	policy, placement := findKind(t, "Policy"), findKind(t, "Placement")
	other, err := e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-2", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-2"})
	if err != nil {
		t.Fatal(err)
	}
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{policyObject("ns", "mine", "inform")}})
	if _, err := e.store.IngestResources(ctx, other.ID, "agent-2", fleet.ResourceBatch{Group: policy.Group, Kind: policy.Kind,
		Upserts: []fleet.ResourceObject{policyObject("ns", "theirs", "inform")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.IngestResources(ctx, e.hub.ID, "agent-1", fleet.ResourceBatch{Group: placement.Group, Kind: placement.Kind,
		Upserts: []fleet.ResourceObject{{Namespace: "ns", Name: "place", Body: map[string]any{"kind": "Placement"}}}}); err != nil {
		t.Fatal(err)
	}
	e.resourceFeedEventually(e.store, policy, "", "", 10, change{"ns/mine", false}, change{"ns/theirs", false})
	e.resourceFeedEventually(e.store, policy, other.ID, "", 10, change{"ns/theirs", false})
	e.resourceFeedEventually(e.store, placement, "", "", 10, change{"ns/place", false})

	// A deployment serving another zone sees none of the eu hubs' objects,
	// and its cursor still moves past them.
	cfg := postgres.DefaultStoreConfig()
	cfg.Zones = fleet.Zones{Served: []string{"us"}}
	elsewhere := postgres.NewStore(e.db, nil, fleet.SystemClock{}, cfg, authz.MustDefault())
	quiet := e.resourceFeedEventually(elsewhere, policy, "", "", 10)
	if quiet.Cursor == "" {
		t.Errorf("ListResourceChanges(zone us) cursor is empty")
	}

	// Deleting a hub tombstones its objects: the feed reports them gone.
	seen := e.resourceFeedEventually(e.store, policy, "", "", 10, change{"ns/mine", false}, change{"ns/theirs", false})
	gomega.NewWithT(t).Expect(e.store.DeleteHub(ctx, other.ID)).To(gomega.Succeed())
	e.resourceFeedEventually(e.store, policy, "", seen.Cursor, 10, change{"ns/theirs", true})
}

func TestResourceFeedRefusesBadAndExpiredCursors(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	policy := findKind(t, "Policy")
	for _, bad := range []string{"not base64!", "MS4x", "Mi4xLjI", "MS54LjE"} {
		if _, err := e.store.ListResourceChanges(ctx, policy, "", bad, 10); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
			t.Errorf("ListResourceChanges(after %q) = %v, want CodeValidation", bad, err)
		}
	}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("mc", "4")}})
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{policyObject("ns", "a", "inform"),
		policyObject("ns", "b", "inform"), policyObject("ns", "c", "inform")}})
	start := e.resourceFeedEventually(e.store, policy, "", "", 1, change{"ns/a", false})
	listCursor, err := e.store.ResourceCursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.ingestResources(fleet.ResourceBatch{Deletes: []string{"ns/a"}})
	e.ingestResources(fleet.ResourceBatch{Deletes: []string{"ns/b"}})
	gone := e.resourceFeedEventually(e.store, policy, "", start.Cursor, 10, change{"ns/c", false}, change{"ns/a", true},
		change{"ns/b", true})
	if err := e.db.Gorm.Exec(`UPDATE resources SET deleted_at = now() - interval '8 days' WHERE name = 'a'`).Error; err != nil {
		t.Fatal(err)
	}
	// The backdating is itself a change: read past it before purging.
	after := e.resourceFeedEventually(e.store, policy, "", gone.Cursor, 10, change{"ns/a", true})
	e.purgeResourcesEventually(1000, 1)
	for _, old := range []string{"", start.Cursor, listCursor, gone.Cursor} {
		if _, err := e.store.ListResourceChanges(ctx, policy, "", old, 10); fleet.ErrorCodeOf(err) != fleet.CodeCursorExpired {
			t.Errorf("ListResourceChanges(after a cursor older than the purge) = %v, want CodeCursorExpired", err)
		}
	}
	e.resourceFeedEventually(e.store, policy, "", after.Cursor, 10)
	now, err := e.store.ResourceCursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.resourceFeedEventually(e.store, policy, "", now, 10)
	// Each table has its horizon: the clusters' feed is not expired.
	e.feedEventually(fleet.Identity{OrgID: "ops"}, true, "", 10, change{"mc", false})
}

// purgeResourcesEventually purges a batch of the resources' tombstones
// older than seven days once it finds want of them.
func (e *inventoryEnv) purgeResourcesEventually(limit, want int) {
	e.t.Helper()
	gomega.NewWithT(e.t).Eventually(func() (int, error) {
		return e.store.PurgeTombstones(context.Background(), "resources", time.Now().Add(-7*24*time.Hour), limit)
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(want), "PurgeTombstones(resources)")
}

func TestPurgeResourceTombstones(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	var objects []fleet.ResourceObject
	doomed := []string{"ns/a", "ns/b", "ns/c"}
	for _, n := range []string{"a", "b", "c", "young", "live"} {
		objects = append(objects, policyObject("ns", n, "inform"))
	}
	e.ingestResources(fleet.ResourceBatch{Upserts: objects})
	e.ingestResources(fleet.ResourceBatch{Deletes: append(doomed, "ns/young")})
	if err := e.db.Gorm.Exec(`UPDATE resources SET deleted_at = now() - interval '8 days' WHERE name IN ('a', 'b', 'c')`).Error; err != nil {
		t.Fatal(err)
	}
	var purgedSeq int64
	e.db.Gorm.Raw(`SELECT max(change_seq) FROM resources WHERE name IN ('a', 'b', 'c')`).Scan(&purgedSeq)
	e.purgeResourcesEventually(2, 2)
	e.purgeResourcesEventually(2, 1)
	live, dead := e.resourceXmins()
	g := gomega.NewWithT(t)
	g.Expect(live).To(gomega.HaveKey("ns/live"))
	g.Expect(live).To(gomega.HaveLen(1))
	g.Expect(dead).To(gomega.Equal([]string{"ns/young"}), "the purge took a tombstone younger than the retention")
	var horizon int64
	e.db.Gorm.Raw(`SELECT change_seq FROM inventory_purge_horizon WHERE table_name = 'resources'`).Scan(&horizon)
	g.Expect(horizon).To(gomega.Equal(purgedSeq), "the resources' purge horizon is not the highest purged position")
	g.Expect(countRows(t, e.db, `SELECT count(*) FROM inventory_purge_horizon WHERE table_name = 'managed_clusters'`)).To(gomega.Equal(0))

	// Every table the purge is given purges.
	for _, table := range postgres.TombstoneTables() {
		_, err := e.store.PurgeTombstones(context.Background(), table, time.Now().Add(-7*24*time.Hour), 1)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "PurgeTombstones(%s)", table)
	}
}
