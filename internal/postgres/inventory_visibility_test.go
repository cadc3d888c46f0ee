package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func names(clusters []fleet.ManagedCluster) []string {
	var out []string
	for _, c := range clusters {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// listed is ListManagedClusters' answer as its items and total.
func listed(page fleet.ManagedClusterPage, err error) ([]fleet.ManagedCluster, int, error) {
	return page.Items, page.Total, err
}

func TestInventoryVisibility(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	owned, err := e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-owned", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-owned", OwnerOrgID: "org-c"})
	if err != nil {
		t.Fatal(err)
	}
	// A registration of org-a placed on the shared hub: put there by SQL, as
	// provisioning_mgr would.
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
	spoof := cluster("spoof", "4") // claims a registration not on its hub
	spoof.Labels[fleet.LabelRegistrationID] = reg.ID
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked, cluster("unregistered", "4")}})
	if _, err := e.store.IngestInventory(ctx, owned.ID, "agent-owned", fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{cluster("customer", "4"), spoof}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		who   fleet.Identity
		admin bool
		want  []string
	}{
		{fleet.Identity{OrgID: "org-a"}, false, []string{"linked"}},
		{fleet.Identity{OrgID: "org-b"}, false, nil},
		{fleet.Identity{OrgID: "org-c"}, false, []string{"customer", "spoof"}},
		{fleet.Identity{}, false, nil},
		{fleet.Identity{OrgID: "org-b"}, true, []string{"customer", "linked", "spoof", "unregistered"}},
	}
	// Every cluster is env=prod in eu-west-1: the searches' totals, read from
	// the per-hub counters, are scoped like the unfiltered list's.
	for _, tc := range cases {
		for _, search := range []string{"", "labels.env = 'prod'", "region = 'eu-west-1'"} {
			got, total, err := listed(e.store.ListManagedClusters(ctx, tc.who, tc.admin, fleet.ListQuery{Search: search}))
			if err != nil || total != len(tc.want) || !slices.Equal(names(got), tc.want) {
				t.Errorf("ListManagedClusters(%s, admin %v, %q) = %v (total %d), %v; want %v", tc.who.OrgID, tc.admin, search, names(got), total, err, tc.want)
			}
		}
	}
	all, _, _ := listed(e.store.ListManagedClusters(ctx, fleet.Identity{}, true, fleet.ListQuery{Search: "name = 'spoof'"}))
	if len(all) != 1 || all[0].RegistrationID != "" {
		t.Errorf("spoofed registration link = %+v, want none (the registration is not on that hub)", all)
	}
}

func TestRegistrationStatusAndImportMaterial(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	ctx := context.Background()
	creds := &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1\nkind: Config # secret-kubeconfig-marker"}
	reg, _, err := e.store.CreateRegistration(ctx, fleet.Identity{OrgID: "org-a", Username: "u"},
		fleet.RegistrationCreate{Name: "mine", Zone: "eu", Product: fleet.ProductOCP, Labels: map[string]string{"env": "prod"}, Credentials: creds}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, e.hub.ID, reg.ID).Error; err != nil {
		t.Fatal(err)
	}
	set, err := e.store.DesiredSet(ctx, e.hub.ID, "agent-1")
	if err != nil || len(set.Registrations) != 1 {
		t.Fatalf("DesiredSet() = %+v, %v", set, err)
	}
	objs := set.Registrations[0].Objects
	kinds := []string{}
	for _, o := range objs {
		kinds = append(kinds, o["kind"].(string))
	}
	if strings.Join(kinds, ",") != "Namespace,ManagedCluster,KlusterletAddonConfig,Secret" ||
		!strings.Contains(objs[3]["stringData"].(map[string]any)["kubeconfig"].(string), "secret-kubeconfig-marker") ||
		objs[1]["metadata"].(map[string]any)["labels"].(map[string]any)["env"] != "prod" {
		t.Errorf("desired objects = %v", objs)
	}
	if _, err := e.store.FindImportMaterial(ctx, fleet.Permitted, "org-a", reg.ID); fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("FindImportMaterial() before the hub made it = %v, want not found", err)
	}
	manifests := "kind: Namespace # import-marker"
	n, err := e.store.RecordRegistrationStatus(ctx, e.hub.ID, "agent-1", []fleet.RegistrationHubStatus{
		{RegistrationID: reg.ID, ImportManifests: &manifests, Conditions: fleet.Conditions{
			{Type: fleet.ConditionJoined, Status: fleet.ConditionTrue, Reason: "ManagedClusterJoined"},
			{Type: fleet.ConditionAvailable, Status: fleet.ConditionTrue, Reason: "ManagedClusterAvailable"},
			{Type: fleet.ConditionPlaced, Status: fleet.ConditionFalse, Reason: "Ignored"}, // not the hub's to say
		}},
		{RegistrationID: "not-on-this-hub"},
	})
	if err != nil || n != 1 {
		t.Fatalf("RecordRegistrationStatus() = %d, %v; want 1 updated", n, err)
	}
	got, err := e.store.FindRegistration(ctx, "org-a", reg.ID)
	if err != nil || !got.Conditions.IsTrue(fleet.ConditionJoined) || !got.Conditions.IsTrue(fleet.ConditionAvailable) ||
		got.Conditions.Reason(fleet.ConditionPlaced) == "Ignored" {
		t.Errorf("registration after the hub's report = %+v, %v", got.Conditions, err)
	}
	if m, err := e.store.FindImportMaterial(ctx, fleet.Permitted, "org-a", reg.ID); err != nil || m != manifests {
		t.Errorf("FindImportMaterial() = %q, %v; want the manifests", m, err)
	}
	if _, err := e.store.FindImportMaterial(ctx, fleet.Permitted, "org-b", reg.ID); fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("FindImportMaterial(another org) = %v, want not found", err)
	}
	var plain int64
	e.db.Gorm.Raw(`SELECT count(*) FROM registrations WHERE encode(import_material, 'escape') LIKE '%import-marker%'`).Scan(&plain)
	if plain != 0 {
		t.Errorf("import material stored in plaintext")
	}
}
