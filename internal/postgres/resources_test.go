package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func policyObject(ns, name, remediation string) fleet.ResourceObject {
	return fleet.ResourceObject{Namespace: ns, Name: name, UID: "uid-" + name, ResourceVersion: "1", Generation: 1,
		Labels: map[string]string{"env": "prod"},
		Body: map[string]any{
			"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
			"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": "1", "labels": map[string]any{"env": "prod"}},
			"spec":     map[string]any{"remediationAction": remediation, "disabled": false},
		}}
}

func (e *inventoryEnv) ingestResources(b fleet.ResourceBatch) fleet.InventoryResult {
	e.t.Helper()
	b.Group, b.Kind = "policy.open-cluster-management.io", "Policy"
	res, err := e.store.IngestResources(context.Background(), e.hub.ID, "agent-1", b)
	if err != nil {
		e.t.Fatalf("IngestResources(%+v): %v", b, err)
	}
	return res
}

// resourceXmins returns each Policy row's transaction id by key, and its
// tombstone: the id moves only when the row is written.
func (e *inventoryEnv) resourceXmins() (map[string]string, []string) {
	e.t.Helper()
	var rows []struct {
		Namespace, Name, Xmin string
		Deleted               bool
	}
	if err := e.db.Gorm.Raw(`SELECT namespace, name, xmin::text AS xmin, deleted_at IS NOT NULL AS deleted FROM resources
WHERE kind = 'Policy'`).Scan(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	live, dead := map[string]string{}, []string{}
	for _, r := range rows {
		if r.Deleted {
			dead = append(dead, fleet.ResourceKey(r.Namespace, r.Name))
		} else {
			live[fleet.ResourceKey(r.Namespace, r.Name)] = r.Xmin
		}
	}
	slices.Sort(dead)
	return live, dead
}

func TestIngestResourcesSkipsUnchangedRows(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	a, b := policyObject("ns", "a", "inform"), policyObject("ns", "b", "inform")
	res := e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{a, b}})
	if res.Written != 2 || res.ContentHashes["ns/a"] != fleet.ResourceContentHash(a.Body) {
		t.Fatalf("IngestResources(first) = %+v, want 2 written and a's hash", res)
	}
	before, _ := e.resourceXmins()

	// A new resourceVersion alone is no change.
	a.ResourceVersion = "2"
	a.Body["metadata"].(map[string]any)["resourceVersion"] = "2"
	b = policyObject("ns", "b", "enforce")
	res = e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{a, b}})
	if res.Written != 1 || res.Unchanged != 1 {
		t.Errorf("IngestResources(a same, b changed) = %+v, want 1 written, 1 unchanged", res)
	}
	after, _ := e.resourceXmins()
	if after["ns/a"] != before["ns/a"] || after["ns/b"] == before["ns/b"] {
		t.Errorf("xmins %v then %v: want a untouched and b written", before, after)
	}

	res = e.ingestResources(fleet.ResourceBatch{Deletes: []string{"ns/a", "ns/missing"}})
	if res.Deleted != 1 {
		t.Errorf("IngestResources(delete a) = %+v, want 1 deleted", res)
	}
	if _, dead := e.resourceXmins(); !slices.Equal(dead, []string{"ns/a"}) {
		t.Errorf("tombstones = %v, want [ns/a]", dead)
	}
	// An upsert revives a tombstone, even with the same content.
	if res = e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{a}}); res.Written != 1 {
		t.Errorf("IngestResources(revive a) = %+v, want 1 written", res)
	}
}

func TestResourceFullResyncTombstonesAndPresent(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	a, b, c := policyObject("ns", "a", "inform"), policyObject("ns", "b", "inform"), policyObject("other", "c", "inform")
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{a, b, c}})
	before, _ := e.resourceXmins()

	// A resync of generation 5 reports a by hash, b with a wrong hash, and
	// not c: a costs no write, b is asked again, c is tombstoned at the end.
	res := e.ingestResources(fleet.ResourceBatch{Generation: 5, Full: true, Present: []fleet.PresentCluster{
		{Name: "ns/a", ContentHash: fleet.ResourceContentHash(a.Body)}, {Name: "ns/b", ContentHash: "stale"}}})
	if res.Confirmed != 1 || !slices.Equal(res.Resend, []string{"ns/b"}) || res.Tombstoned != 0 {
		t.Errorf("IngestResources(full, present) = %+v, want 1 confirmed, ns/b resent", res)
	}
	res = e.ingestResources(fleet.ResourceBatch{Generation: 5, Full: true, Last: true})
	if res.Tombstoned != 1 {
		t.Errorf("IngestResources(full, last) = %+v, want 1 tombstoned", res)
	}
	after, dead := e.resourceXmins()
	if !slices.Equal(dead, []string{"other/c"}) || after["ns/a"] != before["ns/a"] {
		t.Errorf("after the resync: live %v (before %v), tombstones %v; want a untouched, c tombstoned", after, before, dead)
	}

	// A retried resync of a completed generation tombstones nothing.
	res = e.ingestResources(fleet.ResourceBatch{Generation: 5, Full: true, Last: true})
	if res.Tombstoned != 0 {
		t.Errorf("IngestResources(retry of generation 5) = %+v, want nothing tombstoned", res)
	}
	// Another kind's rows are not touched by a Policy resync.
	if _, err := e.store.IngestResources(context.Background(), e.hub.ID, "agent-1", fleet.ResourceBatch{
		Group: "cluster.open-cluster-management.io", Kind: "Placement", Generation: 6, Full: true, Last: true}); err != nil {
		t.Fatal(err)
	}
	if live, _ := e.resourceXmins(); len(live) != 2 {
		t.Errorf("after a Placement resync: live Policies %v, want a and b", live)
	}
}

func TestResourcesOfAnotherAgentAreNotFound(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	batch := fleet.ResourceBatch{Group: "policy.open-cluster-management.io", Kind: "Policy",
		Upserts: []fleet.ResourceObject{policyObject("ns", "a", "inform")}}
	if _, err := e.store.IngestResources(context.Background(), e.hub.ID, "agent-2", batch); fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("IngestResources(another agent) = %v, want not found", err)
	}
	if _, err := e.store.ListAgentKinds(context.Background(), e.hub.ID, "agent-2"); fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("ListAgentKinds(another agent) = %v, want not found", err)
	}
	batch.Kind = "ManagedCluster"
	if _, err := e.store.IngestResources(context.Background(), e.hub.ID, "agent-1", batch); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
		t.Errorf("IngestResources(ManagedCluster) = %v, want a validation error", err)
	}
	if live, _ := e.resourceXmins(); len(live) != 0 {
		t.Errorf("rows %v after refused batches, want none", live)
	}
}

func TestListResources(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	a, b := policyObject("ns", "a", "inform"), policyObject("other", "b", "enforce")
	b.Labels = map[string]string{"env": "dev"}
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{a}}) // a first, by created_at
	e.ingestResources(fleet.ResourceBatch{Upserts: []fleet.ResourceObject{b}})
	kind, _ := fleet.FindResourceKind("policies")
	for _, tc := range []struct {
		q    fleet.ResourceQuery
		want []string
	}{
		{fleet.ResourceQuery{Kind: kind}, []string{"a", "b"}},
		{fleet.ResourceQuery{Kind: kind, Namespace: "other"}, []string{"b"}},
		{fleet.ResourceQuery{Kind: kind, HubID: "nope"}, nil},
		{fleet.ResourceQuery{Kind: kind, ListQuery: fleet.ListQuery{Search: "labels.env = 'prod'"}}, []string{"a"}},
		{fleet.ResourceQuery{Kind: kind, ListQuery: fleet.ListQuery{Search: "remediation_action = 'enforce'"}}, []string{"b"}},
		{fleet.ResourceQuery{Kind: kind, ListQuery: fleet.ListQuery{OrderBy: "name desc"}}, []string{"b", "a"}},
	} {
		got, total, err := e.store.ListResources(context.Background(), tc.q)
		var names []string
		for _, r := range got {
			names = append(names, r.Name)
			if r.Zone != "eu" || r.Hub.Name != "hub-1" {
				t.Errorf("ListResources(%+v): %s has zone %q, hub %q; want eu, hub-1", tc.q, r.Name, r.Zone, r.Hub.Name)
			}
		}
		if err != nil || !slices.Equal(names, tc.want) || total != len(tc.want) {
			t.Errorf("ListResources(%+v) = %v, %d, %v; want %v", tc.q, names, total, err, tc.want)
		}
	}
	if _, _, err := e.store.ListResources(context.Background(), fleet.ResourceQuery{Kind: kind,
		ListQuery: fleet.ListQuery{Search: "console_url = 'x'"}}); fleet.ErrorCodeOf(err) != fleet.CodeBadSearch {
		t.Errorf("ListResources(another kind's field) = %v, want a bad search", err)
	}
}
