package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// inventoryEnv is a store with one agent hub.
type inventoryEnv struct {
	t     *testing.T
	db    *postgres.DB
	store *postgres.Store
	hub   fleet.Hub
}

func newInventoryEnv(t *testing.T) *inventoryEnv {
	t.Helper()
	db, _ := pgtest.NewMigratedDatabase(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyring, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	hub, err := store.CreateHub(context.Background(), fleet.HubCreate{Name: "hub-1", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	return &inventoryEnv{t: t, db: db, store: store, hub: hub}
}

func (e *inventoryEnv) ingest(b fleet.InventoryBatch) fleet.InventoryResult {
	e.t.Helper()
	res, err := e.store.IngestInventory(context.Background(), e.hub.ID, "agent-1", b)
	if err != nil {
		e.t.Fatalf("IngestInventory(%+v): %v", b, err)
	}
	return res
}

// xmins returns each live row's transaction id: it moves only when the row is written.
func (e *inventoryEnv) xmins() map[string]string {
	e.t.Helper()
	var rows []struct{ Name, Xmin string }
	if err := e.db.Gorm.Raw(`SELECT name, xmin::text AS xmin FROM managed_clusters WHERE deleted_at IS NULL`).Scan(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.Xmin
	}
	return out
}

func cluster(name, version string) fleet.ManagedClusterSummary {
	return fleet.ManagedClusterSummary{
		Name: name, UID: "uid-" + name, ResourceVersion: "1",
		Labels:      map[string]string{"env": "prod"},
		Claims:      map[string]string{fleet.ClaimID: "id-" + name, fleet.ClaimVersion: version, fleet.ClaimPlatform: "AWS", fleet.ClaimRegion: "eu-west-1"},
		Capacity:    map[string]string{"cpu": "16", "memory": "64Gi", "core_worker": "12", "socket_worker": "2"},
		Allocatable: map[string]string{"cpu": "15", "memory": "60Gi"},
		Conditions: []fleet.ClusterCondition{
			{Type: fleet.HubConditionAccepted, Status: "True"}, {Type: fleet.HubConditionJoined, Status: "True"},
			{Type: fleet.HubConditionAvailable, Status: "True"},
		},
		KubernetesVersion: "v1.31.4",
	}
}

func TestIngestSkipsUnchangedRows(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	batch := fleet.InventoryBatch{Generation: 1, Upserts: []fleet.ManagedClusterSummary{cluster("a", "4.17.1"), cluster("b", "4.17.1")}}
	if res := e.ingest(batch); res.Written != 2 || res.Unchanged != 0 {
		t.Fatalf("first ingest = %+v, want 2 written", res)
	}
	before := e.xmins()
	// The same batch again (a retry), and a new resourceVersion only: no write.
	again := batch
	again.Upserts = []fleet.ManagedClusterSummary{cluster("a", "4.17.1"), cluster("b", "4.17.1")}
	again.Upserts[1].ResourceVersion = "2"
	if res := e.ingest(again); res.Written != 0 || res.Unchanged != 2 {
		t.Errorf("unchanged ingest = %+v, want 0 written, 2 unchanged", res)
	}
	if after := e.xmins(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("unchanged rows were written: xmin %v, then %v", before, after)
	}
	changed := fleet.InventoryBatch{Generation: 1, Upserts: []fleet.ManagedClusterSummary{cluster("a", "4.17.2"), cluster("b", "4.17.1")}}
	if res := e.ingest(changed); res.Written != 1 || res.Unchanged != 1 {
		t.Errorf("one change = %+v, want 1 written, 1 unchanged", res)
	}
	after := e.xmins()
	if after["a"] == before["a"] || after["b"] != before["b"] {
		t.Errorf("xmin before %v, after %v; want only a rewritten", before, after)
	}
	list, total, err := listed(e.store.ListManagedClusters(context.Background(), fleet.Identity{}, true, fleet.ListQuery{OrderBy: "name"}))
	if err != nil || total != 2 {
		t.Fatalf("ListManagedClusters() = %d, %v", total, err)
	}
	a := list[0]
	capacity, err := a.Capacity.Map()
	if err != nil {
		t.Fatalf("Capacity.Map(): %v", err)
	}
	if a.OpenShiftVersion != "4.17.2" || a.ClusterID != "id-a" || a.Platform != "AWS" || capacity["core_worker"] != "12" ||
		a.Joined != fleet.ConditionTrue || a.Available != fleet.ConditionTrue || a.Hub.Name != "hub-1" {
		t.Errorf("ListManagedClusters()[0] = %+v", a)
	}
}

func TestFullResyncTombstonesWhatTheHubNoLongerHas(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	e.ingest(fleet.InventoryBatch{Generation: 1, Upserts: []fleet.ManagedClusterSummary{cluster("a", "4"), cluster("b", "4"), cluster("c", "4")}})
	// A full resync in two batches that no longer reports b.
	e.ingest(fleet.InventoryBatch{Generation: 2, Full: true, Upserts: []fleet.ManagedClusterSummary{cluster("a", "4")}})
	if n := len(e.xmins()); n != 3 {
		t.Fatalf("live rows before the last batch = %d, want 3 (nothing tombstoned mid-sequence)", n)
	}
	res := e.ingest(fleet.InventoryBatch{Generation: 2, Full: true, Last: true, Upserts: []fleet.ManagedClusterSummary{cluster("c", "4")}})
	if res.Tombstoned != 1 {
		t.Errorf("last batch = %+v, want 1 tombstoned", res)
	}
	live := e.xmins()
	if _, ok := live["b"]; ok || len(live) != 2 {
		t.Errorf("live rows after the resync = %v, want a and c", live)
	}
	// A retried last batch of a completed resync tombstones nothing more.
	if res := e.ingest(fleet.InventoryBatch{Generation: 2, Full: true, Last: true}); res.Tombstoned != 0 {
		t.Errorf("retried last batch = %+v, want nothing tombstoned", res)
	}
	// A deleted cluster reported again comes back.
	e.ingest(fleet.InventoryBatch{Generation: 3, Upserts: []fleet.ManagedClusterSummary{cluster("b", "4")}, Deletes: []string{"a"}})
	live = e.xmins()
	if _, ok := live["b"]; !ok || len(live) != 2 {
		t.Errorf("live rows = %v, want b and c", live)
	}
	var tomb int64
	e.db.Gorm.Raw(`SELECT count(*) FROM managed_clusters WHERE deleted_at IS NOT NULL`).Scan(&tomb)
	if tomb != 1 {
		t.Errorf("tombstones = %d, want 1 (a, kept as a tombstone)", tomb)
	}
}

func TestInventoryOfAnotherAgentIsNotFound(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	_, err := e.store.IngestInventory(context.Background(), e.hub.ID, "agent-2", fleet.InventoryBatch{})
	if fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("IngestInventory(another agent) = %v, want not found", err)
	}
	_, err = e.store.DesiredSet(context.Background(), e.hub.ID, "")
	if fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("DesiredSet(no agent identity) = %v, want not found", err)
	}
}

// TestPresentClustersCostNoWrite: a resync that reports unchanged clusters by
// name and hash writes no inventory row, keeps them through its tombstoning,
// and asks again for those whose hash does not match.
func TestPresentClustersCostNoWrite(t *testing.T) {
	t.Parallel()
	e := newInventoryEnv(t)
	first := e.ingest(fleet.InventoryBatch{Generation: 1, Full: true, Last: true,
		Upserts: []fleet.ManagedClusterSummary{cluster("a", "4"), cluster("b", "4"), cluster("c", "4")}})
	if first.ContentHashes["a"] != cluster("a", "4").ContentHash() || len(first.ContentHashes) != 3 {
		t.Fatalf("first resync hashes = %v, want each summary's ContentHash", first.ContentHashes)
	}
	before := e.xmins()
	res := e.ingest(fleet.InventoryBatch{Generation: 2, Full: true, Last: true, Present: []fleet.PresentCluster{
		{Name: "a", ContentHash: first.ContentHashes["a"]},
		{Name: "b", ContentHash: "stale-hash"},
		{Name: "zz", ContentHash: "never-stored"},
	}})
	if res.Confirmed != 1 || fmt.Sprint(res.Resend) != "[b zz]" || res.Written != 0 || res.Tombstoned != 1 {
		t.Errorf("presence resync = %+v, want 1 confirmed, b and zz resent, nothing written, c tombstoned", res)
	}
	after := e.xmins()
	if after["a"] != before["a"] || after["b"] != before["b"] {
		t.Errorf("present rows were written: xmin %v, then %v", before, after)
	}
	if _, ok := after["c"]; ok {
		t.Errorf("c, reported by nobody, is still live")
	}
}
