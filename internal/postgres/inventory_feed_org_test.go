package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// orgFeedEnv is an inventory whose clusters are seen by different
// organisations: through the hubs they own and through their registrations
// on shared hubs.
type orgFeedEnv struct {
	*inventoryEnv
	owner  map[string]string // hub id -> owner organisation ("" shared)
	agent  map[string]string // hub id -> agent identity
	regOrg map[string]string // registration id -> organisation
}

// newOrgFeedEnv starts from newInventoryEnv's shared hub-1.
func newOrgFeedEnv(t *testing.T) *orgFeedEnv {
	e := &orgFeedEnv{inventoryEnv: newInventoryEnv(t), owner: map[string]string{}, agent: map[string]string{}, regOrg: map[string]string{}}
	e.owner[e.inventoryEnv.hub.ID], e.agent[e.inventoryEnv.hub.ID] = "", "agent-1"
	return e
}

// newHub creates a hub with an agent, owned by owner ("" shared).
func (e *orgFeedEnv) newHub(name, zone, owner string) fleet.Hub {
	e.t.Helper()
	h, err := e.store.CreateHub(context.Background(), fleet.HubCreate{Name: name, Zone: zone, Region: zone + "-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-" + name, OwnerOrgID: owner})
	if err != nil {
		e.t.Fatal(err)
	}
	e.owner[h.ID], e.agent[h.ID] = owner, "agent-"+name
	return h
}

// place creates a registration of org and places it on hub by SQL, as
// provisioning_mgr would.
func (e *orgFeedEnv) place(org, name string, hub fleet.Hub) string {
	e.t.Helper()
	reg, _, err := e.store.CreateRegistration(context.Background(), fleet.Identity{OrgID: org, Username: "u"},
		fleet.RegistrationCreate{Name: name, Zone: hub.Zone, Product: fleet.ProductOCP}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	e.exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, hub.ID, reg.ID)
	e.regOrg[reg.ID] = org
	return reg.ID
}

// report ingests a batch from hub's agent, in one transaction.
func (e *orgFeedEnv) report(hub fleet.Hub, b fleet.InventoryBatch) {
	e.t.Helper()
	if _, err := e.store.IngestInventory(context.Background(), hub.ID, e.agent[hub.ID], b); err != nil {
		e.t.Fatalf("IngestInventory(%s): %v", hub.Name, err)
	}
}

// exec runs a statement, failing the test on an error.
func (e *orgFeedEnv) exec(sql string, args ...any) {
	e.t.Helper()
	if err := e.db.Gorm.Exec(sql, args...).Error; err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// linked is a cluster its hub's agent reports as the registration's.
func linked(name, reg string) fleet.ManagedClusterSummary {
	c := cluster(name, "4")
	c.Labels[fleet.LabelRegistrationID] = reg
	return c
}

// others are n unregistered clusters named prefix0, prefix1, ...
func others(prefix string, n int) []fleet.ManagedClusterSummary {
	out := make([]fleet.ManagedClusterSummary, n)
	for i := range out {
		out[i] = cluster(fmt.Sprint(prefix, i), "4")
	}
	return out
}

// visible filters changes to what org may see, as the list scopes it: the
// clusters of the hubs it owns, and on shared hubs those of its registrations.
func (e *orgFeedEnv) visible(org string, changes []fleet.ManagedClusterChange) []fleet.ManagedClusterChange {
	out := []fleet.ManagedClusterChange{}
	for _, c := range changes {
		owner := e.owner[c.Cluster.Hub.ID]
		if org != "" && (owner == org || (owner == "" && e.regOrg[c.Cluster.RegistrationID] == org)) {
			out = append(out, c)
		}
	}
	return out
}

// TestOrgChangeFeedMatchesTheAdminFeed: an organisation's feed, read a page
// of 1, 2 or 3 at a time, gives exactly the admin feed's changes it may see,
// in its order, from every cursor it hands out, in every served zone: owned
// hubs' changes, its registrations' clusters on shared hubs (also once the
// registration is deleted), tombstones and the rows of deleted hubs; both
// where its read walks the changes in order and where it reads from its
// hubs and registrations past a run of changes it may not see.
func TestOrgChangeFeedMatchesTheAdminFeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOrgFeedEnv(t)
	shared := e.inventoryEnv.hub
	owned, far := e.newHub("hub-owned", "eu", "org-a"), e.newHub("hub-far", "us", "org-a")
	other, shared2 := e.newHub("hub-other", "eu", "org-c"), e.newHub("hub-2", "eu", "")
	regA1, regA2, regA3, regB := e.place("org-a", "a1", shared), e.place("org-a", "a2", shared), e.place("org-a", "a3", shared2), e.place("org-b", "b1", shared)

	e.report(shared, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked("s-a1", regA1), cluster("s-free", "4"), linked("s-b1", regB)}})
	e.report(owned, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("o1", "4"), cluster("o2", "4")}})
	e.report(shared2, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked("t-a3", regA3), cluster("t-free", "4")}})
	// Runs of changes nobody but an admin sees, longer than a read walks
	// (60 rows for a page of 3): the pages after them are read from the
	// organisations' hubs and registrations.
	e.report(shared, fleet.InventoryBatch{Upserts: others("gap1-", 70)})
	e.report(other, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("x1", "4")}})
	// org-a's registration on org-c's hub: org-c's cluster, never org-a's.
	e.exec(`UPDATE managed_clusters SET registration_id = ? WHERE name = 'x1'`, regA1)
	e.report(far, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("f1", "4")}})
	e.report(shared, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked("s-a2", regA2), cluster("s-free2", "4")}})
	e.report(shared2, fleet.InventoryBatch{Upserts: others("gap2-", 70)})
	e.report(owned, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("o3", "4"), cluster("o1", "4.1")}})
	e.report(shared, fleet.InventoryBatch{Deletes: []string{"s-a1"}})
	e.report(owned, fleet.InventoryBatch{Deletes: []string{"o2"}})
	// A deleted registration's cluster stays its organisation's, up to its tombstone.
	e.exec(`UPDATE registrations SET deleted_at = now() WHERE id = ?`, regA3)
	gomega.NewWithT(t).Expect(e.store.DeleteHub(ctx, shared2.ID)).To(gomega.Succeed())
	gomega.NewWithT(t).Expect(e.store.DeleteHub(ctx, owned.ID)).To(gomega.Succeed())

	eu := postgres.DefaultStoreConfig()
	eu.Zones = fleet.Zones{Served: []string{"eu"}}
	stores := map[string]*postgres.Store{"every zone": e.store, "eu": postgres.NewStore(e.db, nil, fleet.SystemClock{}, eu, authz.MustDefault())}
	admin := fleet.Identity{OrgID: "ops"}
	adminFeed := func(store *postgres.Store, after string) []fleet.ManagedClusterChange {
		t.Helper()
		page, err := store.ListManagedClusterChanges(ctx, admin, true, after, 500)
		if err != nil {
			t.Fatalf("ListManagedClusterChanges(admin, %q): %v", after, err)
		}
		return page.Items
	}
	// Every row is readable once every writing transaction has ended.
	rows := countRows(t, e.db, `SELECT count(*) FROM managed_clusters`)
	gomega.NewWithT(t).Eventually(func() int { return len(adminFeed(e.store, "")) }).
		WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.Equal(rows))

	// What each organisation sees, so that the comparison below is not vacuous.
	wantNames := map[string][]change{
		"org-a": {{"f1", false}, {"s-a2", false}, {"s-a1", true}, {"o2", true}, {"t-a3", true}, {"o1", true}, {"o3", true}},
		"org-b": {{"s-b1", false}},
		"org-c": {{"x1", false}},
		"org-d": {},
		"":      {},
	}
	for org, want := range wantNames {
		got := changes(fleet.ChangePage{Items: e.visible(org, adminFeed(e.store, ""))})
		gomega.NewWithT(t).Expect(got).To(gomega.ConsistOf(want), "the admin feed's changes %s may see", org)
	}

	for zone, store := range stores {
		all := adminFeed(store, "")
		for org := range wantNames {
			for _, size := range []int{1, 2, 3} {
				var read []fleet.ManagedClusterChange
				after := ""
				for pages := 0; ; pages++ {
					if pages > rows {
						t.Fatalf("%s, %s, size %d: the feed does not end", zone, org, size)
					}
					page, err := store.ListManagedClusterChanges(ctx, fleet.Identity{OrgID: org}, false, after, size)
					if err != nil {
						t.Fatalf("ListManagedClusterChanges(%s, %q, %d): %v", org, after, size, err)
					}
					want := e.visible(org, adminFeed(store, after))
					want = want[:min(size, len(want))]
					gomega.NewWithT(t).Expect(page.Items).To(gomega.Equal(want), "%s, %s, size %d, page %d", zone, org, size, pages)
					gomega.NewWithT(t).Expect(page.Cursor).NotTo(gomega.BeEmpty())
					read = append(read, page.Items...)
					after = page.Cursor
					if len(page.Items) < size {
						gomega.NewWithT(t).Expect(page.Pending).To(gomega.BeFalse())
						break
					}
				}
				// A short page's cursor is past every change: nothing follows it.
				gomega.NewWithT(t).Expect(e.visible(org, adminFeed(store, after))).To(gomega.BeEmpty(), "%s, %s, size %d", zone, org, size)
				gomega.NewWithT(t).Expect(append([]fleet.ManagedClusterChange{}, read...)).
					To(gomega.Equal(e.visible(org, all)), "%s, %s, size %d: every page", zone, org, size)
			}
		}
	}
	// The deployment serving eu does not see the hub org-a owns in us.
	euNames := changes(fleet.ChangePage{Items: e.visible("org-a", adminFeed(stores["eu"], ""))})
	gomega.NewWithT(t).Expect(euNames).NotTo(gomega.ContainElement(change{"f1", false}))
	gomega.NewWithT(t).Expect(euNames).To(gomega.HaveLen(len(wantNames["org-a"]) - 1))
}

// TestOrgChangeFeedPastAWalk: an organisation's change right after, at or
// right before the end of the changes its read walks (20 per row of the page)
// is read, once, whether the walk or the read from its hubs finds it.
func TestOrgChangeFeedPastAWalk(t *testing.T) {
	t.Parallel()
	e := newOrgFeedEnv(t)
	owned := e.newHub("hub-owned", "eu", "org-a")
	org := fleet.Identity{OrgID: "org-a"}
	after := ""
	for i, step := range []struct{ size, gap int }{{1, 19}, {1, 20}, {1, 21}, {2, 39}, {2, 40}, {2, 41}, {1, 0}} {
		mine := fmt.Sprint("mine-", i)
		if step.gap > 0 {
			e.report(e.inventoryEnv.hub, fleet.InventoryBatch{Upserts: others(fmt.Sprint("gap", i, "-"), step.gap)})
		}
		e.report(owned, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster(mine, "4")}})
		after = e.feedEventually(org, false, after, step.size, change{mine, false}).Cursor
	}
}
