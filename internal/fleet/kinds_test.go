package fleet_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestResourceKindsRegistry checks what every entry needs: an identity the
// hub serves, ManagedCluster as the one kind with its own table, no kind
// twice, and search fields that do not shadow the common ones.
func TestResourceKindsRegistry(t *testing.T) {
	common := map[string]bool{"id": true, "name": true, "namespace": true, "cluster_name": true, "hub_id": true,
		"hub_name": true, "zone": true, "uid": true, "labels": true, "created_at": true, "updated_at": true}
	seen := map[string]bool{}
	var ownTables []string
	for _, k := range fleet.ResourceKinds() {
		if k.Group == "" || k.Version == "" || k.Kind == "" || k.Resource == "" {
			t.Errorf("ResourceKinds(): %+v lacks its group, version, kind or resource", k)
		}
		if seen[k.Group+"/"+k.Kind] || seen[k.Resource] {
			t.Errorf("ResourceKinds(): %s/%s twice", k.Group, k.Kind)
		}
		seen[k.Group+"/"+k.Kind], seen[k.Resource] = true, true
		if k.Table != "" {
			ownTables = append(ownTables, k.Kind)
		}
		if k.ClusterNamespace && !k.Namespaced {
			t.Errorf("ResourceKinds(): %s is cluster-scoped but its namespace is said to be its cluster's", k.Kind)
		}
		for _, f := range k.Fields {
			if common[f.Name] || len(f.Path) == 0 {
				t.Errorf("ResourceKinds(): %s field %+v shadows a common field or has no path", k.Kind, f)
			}
		}
	}
	if len(ownTables) != 1 || ownTables[0] != "ManagedCluster" {
		t.Errorf("ResourceKinds(): kinds with their own table = %v, want [ManagedCluster]", ownTables)
	}
	if got := len(fleet.SyncedResourceKinds()); got != len(fleet.ResourceKinds())-1 {
		t.Errorf("SyncedResourceKinds() has %d kinds, want all but ManagedCluster", got)
	}
}

func TestFindResourceKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{
		{"Policy", "Policy"}, {"policies", "Policy"}, {"placementdecision", "PlacementDecision"},
		{"ManagedCluster", ""}, {"managedclusters", ""}, {"Secret", ""}, {"", ""},
	} {
		k, ok := fleet.FindResourceKind(tc.name)
		if ok != (tc.want != "") || k.Kind != tc.want {
			t.Errorf("FindResourceKind(%q) = %s, %v; want %q", tc.name, k.Kind, ok, tc.want)
		}
	}
	if _, ok := fleet.FindSyncedKind("cluster.open-cluster-management.io", "ManagedCluster"); ok {
		t.Errorf("FindSyncedKind(ManagedCluster) = true, want false: it has its own path")
	}
}

func TestResourceKeys(t *testing.T) {
	for _, tc := range []struct{ ns, name, key string }{{"ns", "a", "ns/a"}, {"", "a", "a"}} {
		if got := fleet.ResourceKey(tc.ns, tc.name); got != tc.key {
			t.Errorf("ResourceKey(%q, %q) = %q, want %q", tc.ns, tc.name, got, tc.key)
		}
		if ns, name := fleet.SplitResourceKey(tc.key); ns != tc.ns || name != tc.name {
			t.Errorf("SplitResourceKey(%q) = %q, %q; want %q, %q", tc.key, ns, name, tc.ns, tc.name)
		}
	}
}

// TestResourceContentHash: what moves at every write of an object does not
// change its hash; anything else does; the body given is not modified.
func TestResourceContentHash(t *testing.T) {
	body := func(rv, remediation string) map[string]any {
		return map[string]any{"kind": "Policy", "metadata": map[string]any{"name": "p", "resourceVersion": rv,
			"managedFields": []any{map[string]any{"manager": rv}}}, "spec": map[string]any{"remediationAction": remediation}}
	}
	a := body("1", "inform")
	h := fleet.ResourceContentHash(a)
	if fleet.ResourceContentHash(body("2", "inform")) != h {
		t.Errorf("ResourceContentHash() moved with the resourceVersion and managed fields")
	}
	if fleet.ResourceContentHash(body("1", "enforce")) == h {
		t.Errorf("ResourceContentHash() did not move with the spec")
	}
	if a["metadata"].(map[string]any)["resourceVersion"] != "1" {
		t.Errorf("ResourceContentHash() modified its argument")
	}
}
