package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestOrgListIsTheAdminListItMaySee pages an organisation's inventory, read
// from its own hubs and registrations (inventory_org.go), in every order,
// with and without searches and at small page sizes, and compares each page
// run and total with the admin's whole list filtered by the visibility rule:
// the hubs it owns, and its registrations' clusters on shared hubs.
func TestOrgListIsTheAdminListItMaySee(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newInventoryEnv(t)
	ctx := context.Background()
	hubs := map[string]fleet.Hub{"hub-1": e.hub} // shared, agent-1
	for _, h := range []struct{ name, owner string }{{"hub-2", ""}, {"hub-o1", "org-x"}, {"hub-o2", "org-x"}, {"hub-y", "org-y"}} {
		hub, err := e.store.CreateHub(ctx, fleet.HubCreate{Name: h.name, Zone: "eu", Region: "eu-west-1",
			DeliveryMode: fleet.DeliveryAgent, Capacity: 100, AgentIdentity: "agent-" + h.name, OwnerOrgID: h.owner})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		hubs[h.name] = hub
	}
	agents := map[string]string{"hub-1": "agent-1"}
	for name := range hubs {
		if name != "hub-1" {
			agents[name] = "agent-" + name
		}
	}
	// Registrations on the shared hubs, two of org-x and one of org-y each,
	// placed by SQL as provisioning_mgr would.
	regOrg := map[string]string{}
	regs := map[string][]string{}
	for _, hub := range []string{"hub-1", "hub-2"} {
		for i, org := range []string{"org-x", "org-x", "org-y"} {
			reg, _, err := e.store.CreateRegistration(ctx, fleet.Identity{OrgID: org, Username: "u"},
				fleet.RegistrationCreate{Name: fmt.Sprintf("%s-r%d", hub, i), Zone: "eu", Product: fleet.ProductOCP}, "")
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, hubs[hub].ID, reg.ID).Error).To(gomega.Succeed())
			regOrg[reg.ID] = org
			regs[hub] = append(regs[hub], reg.ID)
		}
	}
	// Clusters in several batches, so that creation times interleave the
	// hubs: names, regions, versions and labels vary.
	for round := range 3 {
		for _, hub := range []string{"hub-1", "hub-o1", "hub-2", "hub-y", "hub-o2"} {
			var batch fleet.InventoryBatch
			for i := range 3 {
				n := round*3 + i
				c := cluster(fmt.Sprintf("%c%02d-%s", 'a'+rune((n*7+len(hub))%5), n, hub), fmt.Sprintf("4.%d.0", 14+n%4))
				c.Labels["env"] = []string{"prod", "dev"}[n%2]
				c.Claims[fleet.ClaimRegion] = []string{"eu-west-1", "eu-central-1", "eu-north-1"}[(n+len(hub))%3]
				if rs := regs[hub]; len(rs) > 0 && n%4 != 3 {
					c.Labels[fleet.LabelRegistrationID] = rs[n%len(rs)]
				}
				batch.Upserts = append(batch.Upserts, c)
			}
			_, err := e.store.IngestInventory(ctx, hubs[hub].ID, agents[hub], batch)
			g.Expect(err).NotTo(gomega.HaveOccurred())
		}
	}
	owner := map[string]string{}
	for _, h := range hubs {
		owner[h.ID] = h.OwnerOrgID
	}
	compareOrgList(t, e, owner, regOrg)
	// A shared hub holding org-x's registrations cannot be given to org-y
	// (org-y would see them); one given before that rule keeps org-x's
	// registrations' clusters, which org-x then no longer sees.
	y := "org-y"
	_, err := e.store.UpdateHub(ctx, hubs["hub-2"].ID, nil, fleet.HubUpdate{OwnerOrgID: &y})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeHubInUse))
	g.Expect(e.db.Gorm.Exec(`UPDATE hubs SET owner_org_id = ? WHERE id = ?`, y, hubs["hub-2"].ID).Error).NotTo(gomega.HaveOccurred())
	owner[hubs["hub-2"].ID] = y
	compareOrgList(t, e, owner, regOrg)
}

// compareOrgList compares org-x's pages with the admin's list filtered by
// the owners of the hubs and the organisations of the registrations.
func compareOrgList(t *testing.T, e *inventoryEnv, owner, regOrg map[string]string) {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	visible := func(c fleet.ManagedCluster) bool {
		if o := owner[c.Hub.ID]; o != "" {
			return o == "org-x"
		}
		return regOrg[c.RegistrationID] == "org-x"
	}
	admin, org := fleet.Identity{OrgID: "ops"}, fleet.Identity{OrgID: "org-x"}
	for _, orderBy := range []string{"", "name", "hub_name", "region desc", "openshift_version", "updated_at"} {
		for _, search := range []string{"", "labels.env = 'prod'", "name like 'c%' or region = 'eu-north-1'", "hub_name = 'hub-o1'"} {
			all, err := e.store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{OrderBy: orderBy, Search: search, Size: 50})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			want := slices.DeleteFunc(all.Items, func(c fleet.ManagedCluster) bool { return !visible(c) })
			g.Expect(want).NotTo(gomega.BeEmpty(), "orderBy %q, search %q: a case with something to see", orderBy, search)
			for _, size := range []int{2, 3} {
				var got []string
				for page := 1; ; page++ {
					p, err := e.store.ListManagedClusters(ctx, org, false, fleet.ListQuery{OrderBy: orderBy, Search: search, Page: page, Size: size})
					g.Expect(err).NotTo(gomega.HaveOccurred())
					g.Expect(p.Total).To(gomega.Equal(len(want)), "orderBy %q, search %q: total", orderBy, search)
					if len(p.Items) == 0 {
						break
					}
					for _, c := range p.Items {
						got = append(got, c.Name)
					}
				}
				var wantNames []string
				for _, c := range want {
					wantNames = append(wantNames, c.Name)
				}
				g.Expect(got).To(gomega.Equal(wantNames), "orderBy %q, search %q, size %d", orderBy, search, size)
			}
		}
	}
}
