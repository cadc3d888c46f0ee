package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// limitedStore is a store whose organisations may have limits of pools,
// pool clusters and reserved units by default.
func limitedStore(t *testing.T, limits fleet.OrgLimits) (*postgres.Store, *postgres.DB) {
	t.Helper()
	return newStoreOn(t, func(c *postgres.StoreConfig) { c.Pools.Limits = limits })
}

// createPoolOn creates a pool of 0 to 2 clusters named name on the
// blueprint bp.
func createPoolOn(ctx context.Context, store *postgres.Store, caller fleet.Identity, bp, name string) (fleet.CapacityPool, error) {
	return store.CreatePool(ctx, caller, fleet.PoolCreate{Name: name, BlueprintID: bp, BlueprintVersion: 1, Cloud: fleet.CloudAWS,
		Region: "eu-west-1", Zone: "eu", MinClusters: 0, MaxClusters: 2, UnitsPerCluster: 60, Credentials: poolCredentials()})
}

func intRef(v int) *int { return &v }

// expectRefusedBy checks err is the 409 PoolQuotaExceeded that names limit,
// and not the limit's value.
func expectRefusedBy(g *gomega.WithT, err error, limit string, value int, what string) {
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodePoolQuotaExceeded), what)
	g.Expect(fleet.ErrorMessageOf(err)).To(gomega.ContainSubstring(limit), what)
	g.Expect(fleet.ErrorMessageOf(err)).NotTo(gomega.ContainSubstring(fmt.Sprint(value)), what+": the refusal names the limit, not its value")
}

func TestPoolQuotaRefusesAPoolPastTheOrganisationsLimit(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := limitedStore(t, fleet.OrgLimits{Pools: 2})
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	bob := fleet.Identity{OrgID: "org-b", Username: "bob"}
	bpA, err := store.CreateBlueprint(ctx, alice, "kafka", poolBlueprint("4.16.3"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	bpB, err := store.CreateBlueprint(ctx, bob, "kafka", poolBlueprint("4.16.3"))
	g.Expect(err).NotTo(gomega.HaveOccurred())

	for _, name := range []string{"p-1", "p-2"} {
		_, err := createPoolOn(ctx, store, alice, bpA.ID, name)
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	_, err = createPoolOn(ctx, store, alice, bpA.ID, "p-3")
	expectRefusedBy(g, err, fleet.LimitMaxPools, 2, "a third pool")

	// An administrator raises org-a's limit; org-b keeps the default.
	status, err := store.UpdateOrgLimits(ctx, "org-a", "sre", fleet.OrgLimitsPatch{Set: fleet.OrgLimitOverrides{Pools: intRef(3)}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(status.Limits).To(gomega.Equal(fleet.OrgLimits{Pools: 3}))
	g.Expect(status.Usage.Pools).To(gomega.Equal(2))
	_, err = createPoolOn(ctx, store, alice, bpA.ID, "p-3")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "org-a's override lets it have a third pool")
	for _, name := range []string{"p-1", "p-2"} {
		_, err := createPoolOn(ctx, store, bob, bpB.ID, name)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "org-b is not held by org-a's pools")
	}
	_, err = createPoolOn(ctx, store, bob, bpB.ID, "p-3")
	expectRefusedBy(g, err, fleet.LimitMaxPools, 2, "org-b's third pool: org-a's override is org-a's")
	other, err := store.FindOrgLimits(ctx, "org-b")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(other.Limits.Pools).To(gomega.Equal(2))
	g.Expect(other.UpdatedAt).To(gomega.BeNil())

	// Reset, org-a is back at the default, and holds more than it.
	status, err = store.UpdateOrgLimits(ctx, "org-a", "sre", fleet.OrgLimitsPatch{Reset: []string{fleet.LimitMaxPools}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(status.Overrides.Pools).To(gomega.BeNil())
	g.Expect(status.Limits.Pools).To(gomega.Equal(2))
	_, err = createPoolOn(ctx, store, alice, bpA.ID, "p-4")
	expectRefusedBy(g, err, fleet.LimitMaxPools, 2, "past the default again")
	_, err = store.UpdateOrgLimits(ctx, "org-a", "sre", fleet.OrgLimitsPatch{Set: fleet.OrgLimitOverrides{Pools: intRef(-1)}})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeValidation))
}

func TestPoolQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := limitedStore(t, fleet.OrgLimits{Pools: 3})
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	bp, err := store.CreateBlueprint(ctx, alice, "kafka", poolBlueprint("4.16.3"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	errs := make([]error, 12)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = createPoolOn(ctx, store, alice, bp.ID, fmt.Sprintf("p-%02d", i))
		}()
	}
	close(start)
	wg.Wait()
	outcomes := map[fleet.ErrorCode]int{}
	for _, err := range errs {
		if err == nil {
			outcomes[0]++
		} else {
			outcomes[fleet.ErrorCodeOf(err)]++
		}
	}
	g.Expect(outcomes).To(gomega.Equal(map[fleet.ErrorCode]int{0: 3, fleet.CodePoolQuotaExceeded: 9}), "12 concurrent creates at a limit of 3")
	g.Expect(countRows(t, db, `SELECT count(*) FROM capacity_pools WHERE org_id = 'org-a'`)).To(gomega.Equal(3))
}

func TestPoolClustersStopAtTheOrganisationsClusterLimit(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := limitedStore(t, fleet.OrgLimits{PoolClusters: 3})
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	bob := fleet.Identity{OrgID: "org-b", Username: "bob"}
	first := newPool(t, store, alice, "first", 2, 4)
	g.Expect(actionTypesOf(scalePass(t, store, first.ID))).To(gomega.Equal([]string{"ClusterAdded", "ClusterAdded"}))

	// The second pool's minimum is 2; the organisation has room for one.
	second := newPool(t, store, alice, "second", 2, 4)
	g.Expect(actionTypesOf(scalePass(t, store, second.ID))).To(gomega.Equal([]string{"ClusterAdded", "ClusterNotAdded"}))
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_clusters WHERE org_id = 'org-a'`)).To(gomega.Equal(3))
	got, err := store.FindPool(ctx, "org-a", second.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	quota, ok := got.Conditions.Get(fleet.PoolConditionQuotaAvailable)
	g.Expect(ok).To(gomega.BeTrue(), "the pool says why it stopped")
	g.Expect(quota.Status).To(gomega.Equal(fleet.ConditionFalse))
	g.Expect(quota.Reason).To(gomega.Equal(fleet.PoolEventReasonQuotaExceeded))
	g.Expect(quota.Message).To(gomega.ContainSubstring(fleet.LimitMaxPoolClusters))
	g.Expect(got.Phase()).To(gomega.Equal("provisioning"), "below its minimum")
	events, _, err := store.ListPoolEvents(ctx, "org-a", second.ID, fleet.ListQuery{Search: "type = 'ClusterNotAdded'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(events).To(gomega.HaveLen(1))
	g.Expect(events[0].Reason).To(gomega.Equal(fleet.PoolEventReasonQuotaExceeded))
	g.Expect(events[0].Message).To(gomega.ContainSubstring(fleet.LimitMaxPoolClusters))
	g.Expect(events[0].Message).NotTo(gomega.ContainSubstring("3"), "the limit, not its value")

	// Passes while the limit holds add nothing and log no second event.
	g.Expect(actionTypesOf(scalePass(t, store, second.ID))).To(gomega.Equal([]string{"ClusterNotAdded"}))
	_, total, err := store.ListPoolEvents(ctx, "org-a", second.ID, fleet.ListQuery{Search: "type = 'ClusterNotAdded'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(1))

	// The other tenant's pool is not held by org-a's clusters.
	other := newPool(t, store, bob, "other", 3, 4)
	g.Expect(actionTypesOf(scalePass(t, store, other.ID))).To(gomega.Equal([]string{"ClusterAdded", "ClusterAdded", "ClusterAdded"}))

	// Raised for org-a, the second pool gets its minimum and says so.
	_, err = store.UpdateOrgLimits(ctx, "org-a", "sre", fleet.OrgLimitsPatch{Set: fleet.OrgLimitOverrides{PoolClusters: intRef(4)}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(actionTypesOf(scalePass(t, store, second.ID))).To(gomega.Equal([]string{"ClusterAdded"}))
	got, err = store.FindPool(ctx, "org-a", second.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.Conditions.IsTrue(fleet.PoolConditionQuotaAvailable)).To(gomega.BeTrue())
	status, err := store.FindOrgLimits(ctx, "org-a")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(status.Usage).To(gomega.Equal(fleet.OrgUsage{Pools: 2, PoolClusters: 4}))
	// org-b still has the default.
	g.Expect(actionTypesOf(scalePass(t, store, other.ID))).To(gomega.BeEmpty())
	g.Expect(countRows(t, db, `SELECT count(*) FROM pool_clusters WHERE org_id = 'org-b'`)).To(gomega.Equal(3))
}

// TestPoolClustersCountAgainstTheRegistrationQuota: a pool cluster is a
// registration (ADR 0018): pool_mgr adds none past --registration-quota.
func TestPoolClustersCountAgainstTheRegistrationQuota(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreAuthorized(t, nil, quotaAuthorizer(t, 3))
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	_, _, err := store.CreateRegistration(ctx, alice, fleet.RegistrationCreate{Name: "mine", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	pool := newPool(t, store, alice, "kafka", 3, 4)
	g.Expect(actionTypesOf(scalePass(t, store, pool.ID))).To(gomega.Equal([]string{"ClusterAdded", "ClusterAdded", "ClusterNotAdded"}))
	g.Expect(countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = 'org-a' AND deleted_at IS NULL`)).To(gomega.Equal(3))
	got, err := store.FindPool(ctx, "org-a", pool.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	quota, _ := got.Conditions.Get(fleet.PoolConditionQuotaAvailable)
	g.Expect(quota.Status).To(gomega.Equal(fleet.ConditionFalse))
	g.Expect(quota.Message).To(gomega.ContainSubstring("--registration-quota"))
	// And a user's registration is refused as before.
	_, _, err = store.CreateRegistration(ctx, alice, fleet.RegistrationCreate{Name: "more", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeQuotaExceeded))
}

func TestReservedUnitsQuota(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := limitedStore(t, fleet.OrgLimits{ReservedUnits: 100})
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	bob := fleet.Identity{OrgID: "org-b", Username: "bob"}
	hub := poolHub(t, store)
	pool := newPool(t, store, alice, "kafka", 3, 3)
	scalePass(t, store, pool.ID)
	markPoolClustersReady(t, db, pool.ID, hub.ID)
	bobs := newPool(t, store, bob, "kafka", 3, 3)
	scalePass(t, store, bobs.ID)
	markPoolClustersReady(t, db, bobs.ID, hub.ID)

	// 12 clients book 20 units at once: 5 fit the limit of 100, though the
	// pool's 3 clusters of 60 have room for 9.
	errs := make([]error, 12)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 20, InstanceID: fmt.Sprintf("i-%d", i)})
		}()
	}
	close(start)
	wg.Wait()
	outcomes := map[fleet.ErrorCode]int{}
	for _, err := range errs {
		if err == nil {
			outcomes[0]++
		} else {
			outcomes[fleet.ErrorCodeOf(err)]++
			expectRefusedBy(g, err, fleet.LimitMaxReservedUnits, 100, "a booking past the limit")
		}
	}
	g.Expect(outcomes).To(gomega.Equal(map[fleet.ErrorCode]int{0: 5, fleet.CodePoolQuotaExceeded: 7}))
	g.Expect(countRows(t, db, `SELECT coalesce(sum(units), 0) FROM reservations WHERE org_id = 'org-a'`)).To(gomega.Equal(100))
	_, err := store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 1})
	expectRefusedBy(g, err, fleet.LimitMaxReservedUnits, 100, "one unit more")

	// The other tenant books up to its own limit.
	for range 5 {
		_, err := store.CreateReservation(ctx, bob, bobs.ID, fleet.ReservationCreate{Units: 20})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	// Raised for org-a only.
	_, err = store.UpdateOrgLimits(ctx, "org-a", "sre", fleet.OrgLimitsPatch{Set: fleet.OrgLimitOverrides{ReservedUnits: intRef(120)}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 20})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = store.CreateReservation(ctx, bob, bobs.ID, fleet.ReservationCreate{Units: 1})
	expectRefusedBy(g, err, fleet.LimitMaxReservedUnits, 100, "org-b keeps the default")
	status, err := store.FindOrgLimits(ctx, "org-a")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(status.Usage.ReservedUnits).To(gomega.Equal(120))
	g.Expect(*status.Overrides.ReservedUnits).To(gomega.Equal(120))
	g.Expect(status.UpdatedBy).To(gomega.Equal("sre"))
}
