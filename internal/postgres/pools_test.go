package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

func intPtr(v int) *int { return &v }

// poolBlueprint has a fixed infra pool and a workers pool the scaler sizes
// from 2 to 6 nodes, and one add-on.
func poolBlueprint(release string) fleet.BlueprintSpec {
	return fleet.BlueprintSpec{Release: release, ControlPlane: fleet.SizeMedium,
		MachinePools: []fleet.MachinePoolSpec{
			{Name: "infra", Size: fleet.SizeSmall, Replicas: intPtr(2)},
			{Name: "workers", Size: fleet.SizeLarge, Autoscaling: &fleet.Autoscaling{Min: 2, Max: 6}},
		},
		AddOns: []fleet.AddOn{{Name: "observability", Manifests: []map[string]any{
			{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}}}}},
	}
}

func poolCredentials() *fleet.PoolCredentials {
	return &fleet.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "AKIATEST", "aws_secret_access_key": "s3cr3t"},
		PullSecret: `{"auths":{"quay.io":{"auth":"dGVzdA=="}}}`}
}

// newPool makes a blueprint and a pool of min..max clusters of 60 units in
// zone eu for caller.
func newPool(t *testing.T, store *postgres.Store, caller fleet.Identity, name string, minC, maxC int) fleet.CapacityPool {
	t.Helper()
	ctx := context.Background()
	bp, err := store.CreateBlueprint(ctx, caller, name+"-bp", poolBlueprint("4.16.3"))
	if err != nil {
		t.Fatalf("CreateBlueprint: %v", err)
	}
	pool, err := store.CreatePool(ctx, caller, fleet.PoolCreate{Name: name, BlueprintID: bp.ID, BlueprintVersion: 1, Cloud: fleet.CloudAWS,
		Region: "eu-west-1", Zone: "eu", MinClusters: minC, MaxClusters: maxC, UnitsPerCluster: 60, Credentials: poolCredentials()})
	if err != nil {
		t.Fatalf("CreatePool: %v", err)
	}
	return pool
}

// poolHub registers the agent hub of zone eu the pools' clusters go to.
func poolHub(t *testing.T, store *postgres.Store) fleet.Hub {
	t.Helper()
	hub, err := store.CreateHub(context.Background(), fleet.HubCreate{Name: "hub-eu-1", Zone: "eu", Region: "eu-west-1", CloudProvider: "aws",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 100, AgentIdentity: "hub-eu-1-agent"})
	if err != nil {
		t.Fatalf("CreateHub: %v", err)
	}
	return hub
}

// scalePass claims the pool, runs the scaler and applies its actions, as the
// pool reconciler does, and returns the actions.
func scalePass(t *testing.T, store *postgres.Store, poolID string) []fleet.ScaleAction {
	t.Helper()
	ctx := context.Background()
	claims, err := store.ClaimPools(ctx, "test", []string{poolID}, 10, time.Minute)
	if err != nil {
		t.Fatalf("ClaimPools: %v", err)
	}
	for _, c := range claims {
		if c.Input.Pool.ID != poolID {
			continue
		}
		actions := fleet.Scale(c.Input, fleet.DefaultScalerConfig())
		if held, err := store.ApplyPoolPass(ctx, c, actions, time.Hour, nil); err != nil || !held {
			t.Fatalf("ApplyPoolPass = %v, %v", held, err)
		}
		return actions
	}
	t.Fatalf("ClaimPools did not claim pool %s", poolID)
	return nil
}

// markPoolClustersReady plays what placement, delivery and the hub's agent
// do to a pool's registrations (the reconcilers' own tests cover them):
// they are placed on hub, ready, and the hub reports them joined.
func markPoolClustersReady(t *testing.T, db *postgres.DB, poolID, hubID string) {
	t.Helper()
	if err := db.Gorm.Exec(`UPDATE registrations SET hub_id = ?, phase = 'ready',
	hub_conditions = '[{"type": "Joined", "status": "True", "reason": "Joined"}]' WHERE id IN
	(SELECT registration_id FROM pool_clusters WHERE pool_id = ? AND NOT removing) AND deletion_requested_at IS NULL`, hubID, poolID).Error; err != nil {
		t.Fatal(err)
	}
}

func TestBlueprintVersionsAreImmutableAndGuarded(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}

	bp, err := store.CreateBlueprint(ctx, alice, "kafka", poolBlueprint("4.16.3"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(bp.LatestVersion).To(gomega.Equal(1))
	_, err = store.CreateBlueprint(ctx, alice, "kafka", poolBlueprint("4.16.3"))
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNameTaken))
	bad := poolBlueprint("4.16.3")
	bad.ControlPlane = "huge"
	_, err = store.CreateBlueprint(ctx, alice, "other", bad)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeValidation))

	v2, err := store.CreateBlueprintVersion(ctx, fleet.Permitted, alice, bp.ID, poolBlueprint("4.17.1"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(v2.Version).To(gomega.Equal(2))
	v1, err := store.FindBlueprintVersion(ctx, "org-a", bp.ID, 1)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(v1.Spec.Release).To(gomega.Equal("4.16.3"), "version 1 stays as it was")
	got, err := store.FindBlueprint(ctx, "org-a", bp.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.LatestVersion).To(gomega.Equal(2))
	g.Expect(got.Latest.Release).To(gomega.Equal("4.17.1"))
	versions, total, err := store.ListBlueprintVersions(ctx, "org-a", bp.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(2))
	g.Expect(versions[0].Version).To(gomega.Equal(2), "newest first")

	_, err = store.FindBlueprint(ctx, "org-b", bp.ID)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound), "another organisation's blueprint")
	_, err = store.CreateBlueprintVersion(ctx, fleet.Permitted, fleet.Identity{OrgID: "org-b"}, bp.ID, poolBlueprint("4.17.1"))
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))

	_, err = store.CreatePool(ctx, alice, fleet.PoolCreate{Name: "eu", BlueprintID: bp.ID, BlueprintVersion: 1, Cloud: fleet.CloudAWS,
		Region: "eu-west-1", Zone: "eu", MinClusters: 0, MaxClusters: 2, UnitsPerCluster: 10, Credentials: poolCredentials()})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = store.CreatePool(ctx, fleet.Identity{OrgID: "org-b"}, fleet.PoolCreate{Name: "eu", BlueprintID: bp.ID, BlueprintVersion: 1,
		Cloud: fleet.CloudAWS, Region: "eu-west-1", Zone: "eu", MaxClusters: 2, UnitsPerCluster: 10, Credentials: poolCredentials()})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeValidation), "another organisation's blueprint is not there to use")

	g.Expect(fleet.ErrorCodeOf(store.DeleteBlueprintVersion(ctx, fleet.Permitted, "org-a", bp.ID, 1))).To(gomega.Equal(fleet.CodeConflict), "a pool uses it")
	g.Expect(fleet.ErrorCodeOf(store.DeleteBlueprintVersion(ctx, fleet.Permitted, "org-a", bp.ID, 2))).To(gomega.Equal(fleet.CodeConflict), "the latest stays")
	g.Expect(fleet.ErrorCodeOf(store.DeleteBlueprint(ctx, fleet.Permitted, "org-a", bp.ID))).To(gomega.Equal(fleet.CodeConflict), "a pool uses it")
	v1Again, err := store.CreateBlueprintVersion(ctx, fleet.Permitted, alice, bp.ID, poolBlueprint("4.17.2"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(v1Again.Version).To(gomega.Equal(3))
	g.Expect(store.DeleteBlueprintVersion(ctx, fleet.Permitted, "org-a", bp.ID, 2)).To(gomega.Succeed(), "no pool uses version 2")
	_, err = store.FindBlueprintVersion(ctx, "org-a", bp.ID, 2)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
}

func TestPoolMakesScalesAndRemovesItsClusters(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	hub := poolHub(t, store)
	pool := newPool(t, store, alice, "kafka-eu", 2, 3)

	// The minimum comes up as registrations of the pool's organisation.
	g.Expect(actionTypesOf(scalePass(t, store, pool.ID))).To(gomega.Equal([]string{"ClusterAdded", "ClusterAdded"}))
	clusters, total, err := store.ListPoolClusters(ctx, "org-a", pool.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(2))
	g.Expect(clusters[0].State).To(gomega.Equal(fleet.PoolClusterProvisioning))
	g.Expect(clusters[0].Replicas).To(gomega.Equal(map[string]int{"infra": 2, "workers": 2}))
	got, err := store.FindPool(ctx, "org-a", pool.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.Phase()).To(gomega.Equal("provisioning"), "its clusters are being made")
	reg, err := store.FindRegistration(ctx, "org-a", clusters[0].ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(reg.Labels).To(gomega.HaveKeyWithValue(fleet.LabelPoolID, pool.ID))
	g.Expect(reg.Zone).To(gomega.Equal("eu"))
	_, err = store.RequestRegistrationDeletion(ctx, fleet.Permitted, "org-a", reg.ID)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeConflict), "the pool owns its clusters")
	_, err = store.UpdateRegistration(ctx, fleet.Permitted, "org-a", reg.ID, nil, fleet.RegistrationUpdate{Labels: &map[string]string{}})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeConflict))

	// No cluster is ready: a booking finds no room, and the pool is told.
	_, err = store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 5})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeCapacityExhausted))
	markPoolClustersReady(t, db, pool.ID, hub.ID)
	// Joined, they get their add-ons; the refusal came while they were
	// provisioning, so no cluster is added for it.
	g.Expect(actionTypesOf(scalePass(t, store, pool.ID))).To(gomega.Equal([]string{"AddOnsDelivered", "AddOnsDelivered"}))
	g.Expect(scalePass(t, store, pool.ID)).To(gomega.BeEmpty())
	got, err = store.FindPool(ctx, "org-a", pool.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.Phase()).To(gomega.Equal("ready"))
	g.Expect(got.Conditions.IsTrue(fleet.PoolConditionReady)).To(gomega.BeTrue())
	g.Expect(got.Conditions.IsTrue(fleet.PoolConditionCapacityAvailable)).To(gomega.BeTrue())

	// Bookings fill the fullest cluster that fits.
	first, err := store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 10, InstanceID: "kafka-1"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	second, err := store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 8, InstanceID: "kafka-2"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(second.ClusterID).To(gomega.Equal(first.ClusterID), "bin-packed onto the fuller cluster")
	stored, err := store.FindReservation(ctx, "org-a", pool.ID, first.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(stored).To(gomega.Equal(first), "the answer is what was stored")
	g.Expect(first.CreatedAt).NotTo(gomega.BeZero())
	// 18 of the 20 units 2 of 6 workers hold: the threshold (80%) is crossed.
	actions := scalePass(t, store, pool.ID)
	g.Expect(actionTypesOf(actions)).To(gomega.Equal([]string{"NodesScaledUp"}))
	g.Expect(actions[0].Replicas).To(gomega.Equal(map[string]int{"infra": 2, "workers": 3}))
	// Its next wake-up is at 80% of the 30 units 3 workers hold; the other
	// cluster's at 80% of 20.
	g.Expect(countRows(t, db, `SELECT wake_at_units FROM pool_clusters WHERE registration_id = ?`, first.ClusterID)).To(gomega.Equal(24))
	g.Expect(countRows(t, db, `SELECT min(wake_at_units) FROM pool_clusters WHERE pool_id = ?`, pool.ID)).To(gomega.Equal(16))

	// The hub's desired set carries the scaled MachinePool and, for each
	// cluster, every Hive object and its add-on.
	set, err := store.DesiredSet(ctx, hub.ID, hub.AgentIdentity)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var workers map[string]any
	kinds := map[string]int{}
	for _, e := range set.Registrations {
		g.Expect(e.Failure).To(gomega.BeNil())
		for _, o := range e.Objects {
			kinds[o["kind"].(string)]++
			if e.RegistrationID == first.ClusterID && o["kind"] == "MachinePool" && o["spec"].(map[string]any)["name"] == "workers" {
				workers = o
			}
		}
	}
	g.Expect(kinds).To(gomega.Equal(map[string]int{"Namespace": 2, "ManagedCluster": 2, "KlusterletAddonConfig": 2, "ClusterImageSet": 2,
		"Secret": 6, "ClusterDeployment": 2, "MachinePool": 4, "ManifestWork": 2}))
	g.Expect(workers["spec"]).To(gomega.HaveKeyWithValue("replicas", int64(3)))

	// A booking no cluster has room for is refused and adds a cluster.
	third, err := store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 50})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(third.ClusterID).NotTo(gomega.Equal(first.ClusterID), "the fuller cluster has 42 units left")
	_, err = store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 45})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeCapacityExhausted))
	g.Expect(actionTypesOf(scalePass(t, store, pool.ID))).To(gomega.ContainElement("ClusterAdded"))
	g.Expect(actionTypesOf(scalePass(t, store, pool.ID))).NotTo(gomega.ContainElement("ClusterAdded"), "the added cluster answered the refusal")
	events, total, err := store.ListPoolEvents(ctx, "org-a", pool.ID, fleet.ListQuery{Search: "type = 'ClusterAdded'", OrderBy: "at"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(3))
	g.Expect([]string{events[0].Reason, events[1].Reason, events[2].Reason}).To(gomega.Equal([]string{"BelowMinimum", "BelowMinimum", "NoRoomForReservation"}))

	// Deleting the pool waits for its reservations, then removes every cluster.
	g.Expect(fleet.ErrorCodeOf(store.RequestPoolDeletion(ctx, fleet.Permitted, "org-a", pool.ID, nil))).To(gomega.Equal(fleet.CodeConflict))
	for _, r := range []fleet.Reservation{first, second, third} {
		g.Expect(store.DeleteReservation(ctx, fleet.Permitted, "org-a", pool.ID, r.ID)).To(gomega.Succeed())
	}
	g.Expect(fleet.ErrorCodeOf(store.DeleteReservation(ctx, fleet.Permitted, "org-a", pool.ID, second.ID))).To(gomega.Equal(fleet.CodeNotFound))
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_clusters WHERE pool_id = ? AND (reserved_units <> 0 OR empty_since IS NULL)`, pool.ID)).
		To(gomega.BeZero(), "released clusters are empty, and know since when")
	g.Expect(store.RequestPoolDeletion(ctx, fleet.Permitted, "org-a", pool.ID, nil)).To(gomega.Succeed())
	_, err = store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 1})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeConflict))
	g.Expect(actionTypesOf(scalePass(t, store, pool.ID))).To(gomega.Equal([]string{"ClusterRemoved", "ClusterRemoved", "ClusterRemoved"}))
	g.Expect(countRows(t, db, `SELECT count(*) FROM registrations r JOIN pool_clusters pc ON pc.registration_id = r.id
		WHERE pc.pool_id = ? AND r.deletion_requested_at IS NOT NULL`, pool.ID)).To(gomega.Equal(3))
	_, err = store.FindPool(ctx, "org-a", pool.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the pool stays until its clusters are gone")
	// deleting_mgr finishes the registrations once the hub removed them;
	// Hive is still deprovisioning one cluster, whose ClusterDeployment its
	// hub still reports.
	var deprovisioning string
	g.Expect(db.Gorm.Raw(`SELECT cluster_name FROM pool_clusters WHERE registration_id = ?`, first.ClusterID).Scan(&deprovisioning).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`INSERT INTO resources (hub_id, zone, api_group, version, kind, namespace, name, cluster_name, body, content_hash)
VALUES (?, 'eu', 'hive.openshift.io', 'v1', 'ClusterDeployment', ?, ?, ?, '{}', 'h')`, hub.ID, deprovisioning, deprovisioning, deprovisioning).Error).
		To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE registrations SET deleted_at = now() WHERE id IN (SELECT registration_id FROM pool_clusters WHERE pool_id = ?)`,
		pool.ID).Error).To(gomega.Succeed())
	scalePass(t, store, pool.ID)
	left, total, err := store.ListPoolClusters(ctx, "org-a", pool.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the pool stays while Hive deprovisions a cluster")
	g.Expect(total).To(gomega.Equal(1))
	g.Expect(left[0].ID).To(gomega.Equal(first.ClusterID))
	g.Expect(left[0].State).To(gomega.Equal(fleet.PoolClusterDeprovisioning))
	// Deprovisioned, the ClusterDeployment leaves the hub: the pool goes.
	g.Expect(db.Gorm.Exec(`UPDATE resources SET deleted_at = now() WHERE name = ?`, deprovisioning).Error).To(gomega.Succeed())
	scalePass(t, store, pool.ID)
	_, err = store.FindPool(ctx, "org-a", pool.ID)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
}

func actionTypesOf(actions []fleet.ScaleAction) []string {
	out := []string{}
	for _, a := range actions {
		out = append(out, a.Type)
	}
	return out
}

// TestReservationRaceNeverOverbooks: 16 clients book at once into one pool
// whose clusters cannot take every booking; no cluster ends past its
// capacity, every accepted booking is recorded, and every refusal is
// CapacityExhausted.
func TestReservationRaceNeverOverbooks(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	hub := poolHub(t, store)
	pool := newPool(t, store, alice, "race", 3, 3)
	scalePass(t, store, pool.ID)
	markPoolClustersReady(t, db, pool.ID, hub.ID)

	// 3 clusters of 60 units; 16 clients book 7 units 4 times each: 448
	// units asked, at most 8 bookings of 7 fit a cluster.
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := map[string]int{}, 0
	var unexpected []error
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				r, err := store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 7, InstanceID: fmt.Sprintf("i-%d-%d", i, j)})
				mu.Lock()
				switch {
				case err == nil:
					accepted[r.ID] = r.Units
				case fleet.ErrorCodeOf(err) == fleet.CodeCapacityExhausted:
					refused++
				default:
					unexpected = append(unexpected, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	g.Expect(unexpected).To(gomega.BeEmpty())
	g.Expect(accepted).To(gomega.HaveLen(24), "8 bookings of 7 fit each of 3 clusters of 60")
	g.Expect(refused).To(gomega.Equal(64 - 24))
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_clusters WHERE pool_id = ? AND reserved_units > capacity_units`, pool.ID)).To(gomega.BeZero())
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_clusters pc WHERE pool_id = ?
		AND reserved_units <> (SELECT coalesce(sum(units), 0) FROM reservations v WHERE v.cluster_id = pc.registration_id)`, pool.ID)).To(gomega.BeZero(),
		"every cluster's reserved units are the sum of its reservations")
	list, total, err := store.ListReservations(ctx, "org-a", pool.ID, fleet.ListQuery{Size: 100})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(24))
	for _, r := range list {
		g.Expect(accepted).To(gomega.HaveKey(r.ID))
	}
	// Ordered by free units, the clusters show where room is left.
	clusters, _, err := store.ListPoolClusters(ctx, "org-a", pool.ID, fleet.ListQuery{OrderBy: "free_units desc", Search: "state = 'ready'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(clusters).To(gomega.HaveLen(3))
	for _, c := range clusters {
		g.Expect(c.FreeUnits()).To(gomega.Equal(4))
	}
}

// TestWokenPoolsAreClaimedFirst: a pool named by a wake-up (a booking) is
// claimed before pools merely due for their resync, however many are due,
// so a booking that crosses a threshold never waits behind the resync.
func TestWokenPoolsAreClaimedFirst(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	var ids []string
	for i := range 3 {
		ids = append(ids, newPool(t, store, alice, fmt.Sprintf("p%d", i), 0, 1).ID)
	}
	// The first two are long due; the third is not due for an hour.
	g.Expect(db.Gorm.Exec(`UPDATE capacity_pools SET next_pass_at = now() - interval '1 hour' WHERE id IN ?`, ids[:2]).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE capacity_pools SET next_pass_at = now() + interval '1 hour' WHERE id = ?`, ids[2]).Error).To(gomega.Succeed())
	claims, err := store.ClaimPools(ctx, "test", []string{ids[2]}, 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(1))
	g.Expect(claims[0].Input.Pool.ID).To(gomega.Equal(ids[2]))
	claims, err = store.ClaimPools(ctx, "test", nil, 5, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(2), "the due ones, not the one claimed already")
}

// TestIdleClusterBookedSinceTheClaimStays: the scaler decides to remove an
// idle cluster from what its claim read; a booking lands on that cluster
// before the decision is applied. The cluster stays, with its reservation,
// and no removal is recorded.
func TestIdleClusterBookedSinceTheClaimStays(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	hub := poolHub(t, store)
	pool := newPool(t, store, alice, "idle", 2, 3)
	scalePass(t, store, pool.ID)
	markPoolClustersReady(t, db, pool.ID, hub.ID)
	g.Expect(store.UpdatePool(ctx, fleet.Permitted, "org-a", pool.ID, nil, fleet.PoolUpdate{MinClusters: intPtr(1)})).Error().NotTo(gomega.HaveOccurred())
	// The first cluster made has been empty longest: the scaler's choice,
	// and the fullest-first booking's too (a tie, broken by age).
	var first string
	g.Expect(db.Gorm.Raw(`SELECT registration_id FROM pool_clusters WHERE pool_id = ? ORDER BY created_at, registration_id LIMIT 1`,
		pool.ID).Scan(&first).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE pool_clusters SET empty_since = now() - CASE WHEN registration_id = ? THEN interval '2 hours'
		ELSE interval '1 hour' END WHERE pool_id = ?`, first, pool.ID).Error).To(gomega.Succeed())

	claims, err := store.ClaimPools(ctx, "test", []string{pool.ID}, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(1))
	actions := fleet.Scale(claims[0].Input, fleet.DefaultScalerConfig())
	g.Expect(actionTypesOf(actions)).To(gomega.ContainElement("ClusterRemoved"))
	booked, err := store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 5})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(booked.ClusterID).To(gomega.Equal(first))
	held, err := store.ApplyPoolPass(ctx, claims[0], actions, time.Hour, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(held).To(gomega.BeTrue())

	g.Expect(countRows(t, db, `SELECT count(*) FROM registrations WHERE id = ? AND deletion_requested_at IS NULL`, first)).To(gomega.Equal(1))
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_clusters WHERE registration_id = ? AND NOT removing AND reserved_units = 5`, first)).To(gomega.Equal(1))
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_events WHERE pool_id = ? AND type = 'ClusterRemoved'`, pool.ID)).To(gomega.BeZero())
}
