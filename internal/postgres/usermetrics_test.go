package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// metricsEnv is an inventory of three organisations: org-a and org-b with
// registrations on the shared hubs hub-1 and hub-2, org-c with its own hub,
// and a cluster of a shared hub that no registration claims.
type metricsEnv struct {
	*inventoryEnv
	hub2, owned fleet.Hub
	// regs are the registrations by name: a1 on hub-1, a2 on hub-2 and a3
	// on none (org-a); b1 on hub-1, b2 on hub-2 (org-b); c1 on hub-c (org-c).
	regs map[string]fleet.Registration
}

func newMetricsEnv(t *testing.T) *metricsEnv {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	e := &metricsEnv{inventoryEnv: newInventoryEnv(t), regs: map[string]fleet.Registration{}}
	var err error
	e.hub2, err = e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-2", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-2"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	e.owned, err = e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-c", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-c", OwnerOrgID: "org-c"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, r := range []struct{ name, org, hub string }{
		{"a1", "org-a", e.hub.ID}, {"a2", "org-a", e.hub2.ID}, {"a3", "org-a", ""},
		{"b1", "org-b", e.hub.ID}, {"b2", "org-b", e.hub2.ID}, {"c1", "org-c", e.owned.ID},
	} {
		reg, _, err := e.store.CreateRegistration(ctx, fleet.Identity{OrgID: r.org, Username: "u"},
			fleet.RegistrationCreate{Name: r.name, Zone: "eu", Product: fleet.ProductOCP}, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		if r.hub != "" { // placed by SQL, as provisioning_mgr would
			g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, r.hub, reg.ID).Error).To(gomega.Succeed())
		}
		e.regs[r.name] = reg
	}
	// a1 is ready, so the organisations' phases differ.
	g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET phase = 'ready' WHERE id = ?`, e.regs["a1"].ID).Error).To(gomega.Succeed())
	linked := func(name, reg string) fleet.ManagedClusterSummary {
		c := cluster(name, "4.17.1")
		c.Labels[fleet.LabelRegistrationID] = e.regs[reg].ID
		return c
	}
	e.ingest(fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{linked("a1-x", "a1"), linked("b1-x", "b1"), cluster("loose", "4.17.1")}})
	for _, b := range []struct {
		hub   fleet.Hub
		batch []fleet.ManagedClusterSummary
	}{
		{e.hub2, []fleet.ManagedClusterSummary{linked("a2-x", "a2"), linked("a2-y", "a2"), linked("b2-x", "b2")}},
		{e.owned, []fleet.ManagedClusterSummary{linked("c1-x", "c1"), cluster("c-own", "4.17.1")}},
	} {
		_, err := e.store.IngestInventory(ctx, b.hub.ID, b.hub.AgentIdentity, fleet.InventoryBatch{Upserts: b.batch})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	return e
}

func clusterNames(clusters []fleet.MetricsCluster) []string {
	out := []string{}
	for _, c := range clusters {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// byName is the clusters by their names.
func byName(clusters []fleet.MetricsCluster) map[string]fleet.MetricsCluster {
	out := map[string]fleet.MetricsCluster{}
	for _, c := range clusters {
		out[c.Name] = c
	}
	return out
}

// TestMetricsClustersFollowTheInventorysVisibility reads every caller's
// clusters: each organisation exactly its own (its hub's, and its
// registrations' on shared hubs), an admin all, a caller of no organisation
// none; and one registration's, which another organisation cannot name.
func TestMetricsClustersFollowTheInventorysVisibility(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newMetricsEnv(t)
	ctx := context.Background()
	admin := fleet.MetricsScope{Caller: fleet.Identity{OrgID: "ops"}, Admin: true}
	for _, tc := range []struct {
		scope fleet.MetricsScope
		want  []string
	}{
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}}, []string{"a1-x", "a2-x", "a2-y"}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-b"}}, []string{"b1-x", "b2-x"}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-c"}}, []string{"c-own", "c1-x"}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-d"}}, []string{}},
		{fleet.MetricsScope{}, []string{}},
		{admin, []string{"a1-x", "a2-x", "a2-y", "b1-x", "b2-x", "c-own", "c1-x", "loose"}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}, RegistrationID: e.regs["a2"].ID}, []string{"a2-x", "a2-y"}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}, RegistrationID: e.regs["a3"].ID}, []string{}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-c"}, RegistrationID: e.regs["c1"].ID}, []string{"c1-x"}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "ops"}, Admin: true, RegistrationID: e.regs["b1"].ID}, []string{"b1-x"}},
	} {
		got, err := e.store.MetricsClusters(ctx, tc.scope)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "%+v", tc.scope)
		g.Expect(clusterNames(got)).To(gomega.Equal(tc.want), "MetricsClusters(%+v)", tc.scope)
		g.Expect(slices.IsSortedFunc(got, func(a, b fleet.MetricsCluster) int {
			return strings.Compare(a.ManagedClusterID, b.ManagedClusterID)
		})).To(gomega.BeTrue(), "in the order of their ids")
	}

	all, err := e.store.MetricsClusters(ctx, admin)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	clusters := byName(all)
	a1 := clusters["a1-x"]
	capacity, err := a1.Capacity.Map()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	allocatable, err := a1.Allocatable.Map()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(a1.ManagedClusterID).NotTo(gomega.BeEmpty())
	g.Expect([]any{a1.ClusterID, a1.HubID, a1.RegistrationID, a1.Phase, a1.OrgID, a1.Available, a1.Joined,
		a1.OpenShiftVersion, a1.KubernetesVersion, a1.Platform, a1.Region, capacity["cpu"], allocatable["memory"], a1.Stale}).
		To(gomega.Equal([]any{"id-a1-x", e.hub.ID, e.regs["a1"].ID, fleet.PhaseReady, "org-a", fleet.ConditionTrue, fleet.ConditionTrue,
			"4.17.1", "v1.31.4", "AWS", "eu-west-1", "16", "60Gi", false}))
	g.Expect([]any{clusters["a2-y"].OrgID, clusters["a2-y"].Phase, clusters["a2-y"].HubID}).
		To(gomega.Equal([]any{"org-a", e.regs["a2"].Phase, e.hub2.ID}), "a registration's phase as stored")
	g.Expect([]any{clusters["c-own"].OrgID, clusters["c-own"].RegistrationID, clusters["c-own"].Phase}).
		To(gomega.Equal([]any{"org-c", "", fleet.Phase("")}), "an unregistered cluster of an owned hub is its owner's")
	g.Expect([]any{clusters["loose"].OrgID, clusters["loose"].RegistrationID}).To(gomega.Equal([]any{"", ""}),
		"a shared hub's unclaimed cluster is no organisation's")

	// A registration the caller may not see is not found, and the refusal
	// repeats neither its id nor its organisation.
	g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET deleted_at = now() WHERE id = ?`, e.regs["a3"].ID).Error).To(gomega.Succeed())
	for _, scope := range []fleet.MetricsScope{
		{Caller: fleet.Identity{OrgID: "org-a"}, RegistrationID: e.regs["b1"].ID},
		{Caller: fleet.Identity{}, RegistrationID: e.regs["a1"].ID},
		{Caller: fleet.Identity{OrgID: "org-a"}, RegistrationID: e.regs["a3"].ID},
		{Caller: fleet.Identity{OrgID: "ops"}, Admin: true, RegistrationID: "no-such-registration"},
	} {
		got, err := e.store.MetricsClusters(ctx, scope)
		g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound), "MetricsClusters(%+v) = %v", scope, got)
		var fe *fleet.Error
		g.Expect(errors.As(err, &fe)).To(gomega.BeTrue())
		g.Expect(fe.Message).NotTo(gomega.Or(gomega.ContainSubstring(scope.RegistrationID), gomega.ContainSubstring("org-b")))
	}
}

// TestMetricsClustersRefusePastTheLimit reads at most the limit's clusters:
// one more is refused, whoever asks.
func TestMetricsClustersRefusePastTheLimit(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newMetricsEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		scope fleet.MetricsScope
		fits  int
	}{
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}}, 3},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "ops"}, Admin: true}, 8},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}, RegistrationID: e.regs["a2"].ID}, 2},
	} {
		tc.scope.Limit = tc.fits
		got, err := e.store.MetricsClusters(ctx, tc.scope)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(got).To(gomega.HaveLen(tc.fits), "MetricsClusters(%+v)", tc.scope)
		inv, err := e.store.MetricsInventory(ctx, tc.scope)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(inv.Clusters).To(gomega.Equal(got))
		tc.scope.Limit = tc.fits - 1
		_, err = e.store.MetricsClusters(ctx, tc.scope)
		g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeMetricsTooManyClusters), "MetricsClusters(%+v)", tc.scope)
		_, err = e.store.MetricsInventory(ctx, tc.scope)
		g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeMetricsTooManyClusters), "MetricsInventory(%+v)", tc.scope)
	}
}

// complianceOf is the compliance rows as cluster/policy/state, with the
// policies' names for their ids.
func complianceOf(rows []fleet.PolicyComplianceState, clusters map[string]string, policies map[string]fleet.Policy) []string {
	out := []string{}
	for _, r := range rows {
		p := policies[r.PolicyID]
		name := r.PolicyName
		if p.Name != name {
			name = "wrong name " + name
		}
		out = append(out, clusters[r.ManagedClusterID]+"/"+name+"/"+r.State)
	}
	slices.Sort(out)
	return out
}

// phasesOf counts org's live registrations per phase from their rows.
func phasesOf(t *testing.T, e *metricsEnv, org string) []fleet.PhaseCount {
	t.Helper()
	regs, total, err := e.store.ListRegistrations(context.Background(), org, fleet.ListQuery{Size: 100})
	if err != nil || total != len(regs) {
		t.Fatalf("ListRegistrations(%s) = %d of %d, %v", org, len(regs), total, err)
	}
	counts := map[fleet.Phase]int{}
	for _, r := range regs {
		counts[r.Phase]++
	}
	out := []fleet.PhaseCount{}
	for phase, n := range counts {
		out = append(out, fleet.PhaseCount{OrgID: org, Phase: phase, Count: n})
	}
	slices.SortFunc(out, func(a, b fleet.PhaseCount) int { return strings.Compare(string(a.Phase), string(b.Phase)) })
	return out
}

// TestMetricsInventoryIsTheScopes reads the compliance, phases and pools
// beside each caller's clusters: an organisation's own policies on its own
// clusters, its registrations' phases and its pools; an admin every one; a
// registration's scope its clusters' compliance only.
func TestMetricsInventoryIsTheScopes(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newMetricsEnv(t)
	ctx := context.Background()
	policies := map[string]fleet.Policy{}
	policy := func(org, name string) fleet.Policy {
		p, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: org}, fleet.PolicyCreate{Zone: "eu", Body: policyBody(name, "inform"), Selector: prodSelector()})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		policies[p.ID] = p
		return p
	}
	pa, pb, pc := policy("org-a", "pa"), policy("org-b", "pb"), policy("org-c", "pc")
	report := func(hub fleet.Hub, roots ...fleet.ResourceObject) {
		_, err := e.store.IngestResources(ctx, hub.ID, hub.AgentIdentity, fleet.ResourceBatch{
			Group: "policy.open-cluster-management.io", Kind: "Policy", Upserts: roots})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	// Each organisation's policy on hub-1 names the other's cluster too: a
	// report is the hub's, and a cluster shows only its own organisation's
	// policies. "gone" is in no inventory.
	report(e.hub, rootPolicy(pa, e.hub.ID, state("a1-x", "NonCompliant"), state("b1-x", "Compliant"), state("gone", "")),
		rootPolicy(pb, e.hub.ID, state("b1-x", "Compliant"), state("a1-x", "Compliant")))
	report(e.hub2, rootPolicy(pa, e.hub2.ID, state("a2-x", "Compliant"), state("a2-y", "")))
	report(e.owned, rootPolicy(pc, e.owned.ID, state("c1-x", "NonCompliant"), state("c-own", "Compliant")))

	// org-a's pool has two clusters, one of them booked; org-b's is empty.
	hub := poolHub(t, e.store)
	pool := newPool(t, e.store, fleet.Identity{OrgID: "org-a", Username: "alice"}, "kafka", 2, 3)
	scalePass(t, e.store, pool.ID)
	markPoolClustersReady(t, e.db, pool.ID, hub.ID)
	scalePass(t, e.store, pool.ID)
	booked, err := e.store.CreateReservation(ctx, fleet.Identity{OrgID: "org-a", Username: "alice"}, pool.ID, fleet.ReservationCreate{Units: 10})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	empty := newPool(t, e.store, fleet.Identity{OrgID: "org-b", Username: "bob"}, "idle", 0, 1)
	poolClusters, _, err := e.store.ListPoolClusters(ctx, "org-a", pool.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(poolClusters).To(gomega.HaveLen(2))
	units := map[string]int64{}
	for _, c := range poolClusters {
		units[c.ID] = int64(c.CapacityUnits)
	}
	kafka := fleet.PoolUsage{PoolID: pool.ID, PoolName: "kafka", OrgID: "org-a", Clusters: 2,
		CapacityUnits: units[poolClusters[0].ID] + units[poolClusters[1].ID], ReservedUnits: 10}
	idle := fleet.PoolUsage{PoolID: empty.ID, PoolName: "idle", OrgID: "org-b"}

	admin := fleet.MetricsScope{Caller: fleet.Identity{OrgID: "ops"}, Admin: true}
	orgA, orgB := fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}}, fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-b"}}
	read := func(scope fleet.MetricsScope) (fleet.MetricsInventory, map[string]string) {
		inv, err := e.store.MetricsInventory(ctx, scope)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "MetricsInventory(%+v)", scope)
		clusters, err := e.store.MetricsClusters(ctx, scope)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(inv.Clusters).To(gomega.Equal(clusters), "MetricsInventory(%+v): the clusters of MetricsClusters", scope)
		names := map[string]string{}
		for _, c := range inv.Clusters {
			names[c.ManagedClusterID] = c.Name
		}
		return inv, names
	}
	for _, tc := range []struct {
		scope      fleet.MetricsScope
		compliance []string
		phases     []fleet.PhaseCount
		pools      []fleet.PoolUsage
	}{
		{orgA, []string{"a1-x/pa/NonCompliant", "a2-x/pa/Compliant", "a2-y/pa/Pending"}, phasesOf(t, e, "org-a"), []fleet.PoolUsage{kafka}},
		{orgB, []string{"b1-x/pb/Compliant"}, phasesOf(t, e, "org-b"), []fleet.PoolUsage{idle}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-c"}}, []string{"c-own/pc/Compliant", "c1-x/pc/NonCompliant"},
			phasesOf(t, e, "org-c"), []fleet.PoolUsage{}},
		{admin, []string{"a1-x/pa/NonCompliant", "a1-x/pb/Compliant", "a2-x/pa/Compliant", "a2-y/pa/Pending", "b1-x/pa/Compliant",
			"b1-x/pb/Compliant", "c-own/pc/Compliant", "c1-x/pc/NonCompliant"},
			slices.Concat(phasesOf(t, e, "org-a"), phasesOf(t, e, "org-b"), phasesOf(t, e, "org-c")), []fleet.PoolUsage{kafka, idle}},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-a"}, RegistrationID: e.regs["a2"].ID},
			[]string{"a2-x/pa/Compliant", "a2-y/pa/Pending"}, []fleet.PhaseCount{}, []fleet.PoolUsage{}},
		{fleet.MetricsScope{}, []string{}, []fleet.PhaseCount{}, []fleet.PoolUsage{}},
	} {
		inv, names := read(tc.scope)
		g.Expect(complianceOf(inv.Compliance, names, policies)).To(gomega.Equal(tc.compliance), "MetricsInventory(%+v).Compliance", tc.scope)
		g.Expect(inv.Phases).To(gomega.Equal(tc.phases), "MetricsInventory(%+v).Phases", tc.scope)
		g.Expect(inv.Pools).To(gomega.Equal(tc.pools), "MetricsInventory(%+v).Pools", tc.scope)
	}
	inv, _ := read(orgA)
	g.Expect(inv.Phases).To(gomega.ContainElement(fleet.PhaseCount{OrgID: "org-a", Phase: fleet.PhaseReady, Count: 3}),
		"a1 and the pool's two clusters are ready")

	// A deleted policy's rows leave; a cluster being removed leaves its
	// pool's figures.
	g.Expect(e.store.DeletePolicy(ctx, fleet.Permitted, "org-b", pb.ID, nil)).To(gomega.Succeed())
	for id := range units {
		if id != booked.ClusterID {
			g.Expect(e.db.Gorm.Exec(`UPDATE pool_clusters SET removing = true WHERE registration_id = ?`, id).Error).To(gomega.Succeed())
		}
	}
	kafka.Clusters, kafka.CapacityUnits = 1, units[booked.ClusterID]
	inv, names := read(admin)
	g.Expect(complianceOf(inv.Compliance, names, policies)).To(gomega.Equal([]string{"a1-x/pa/NonCompliant", "a2-x/pa/Compliant",
		"a2-y/pa/Pending", "b1-x/pa/Compliant", "c-own/pc/Compliant", "c1-x/pc/NonCompliant"}))
	g.Expect(inv.Pools).To(gomega.Equal([]fleet.PoolUsage{kafka, idle}))
	inv, _ = read(orgB)
	g.Expect(inv.Compliance).To(gomega.BeEmpty())
}

// TestTextArrayParameterRoundTrips sends values an array literal must quote
// and reads them back unchanged.
func TestTextArrayParameterRoundTrips(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	_, db := newStoreOn(t, nil)
	values := []string{"plain", "", "NULL", `quo"te`, `back\slash`, "com,ma", "{brace}", " spaced ", "ünï"}
	var got []string
	g.Expect(db.Gorm.Raw(`SELECT v FROM unnest(?::text[]) WITH ORDINALITY AS a(v, n) ORDER BY n`,
		postgres.TextArrayForTest(values)).Scan(&got).Error).To(gomega.Succeed())
	g.Expect(got).To(gomega.Equal(values))
	var n int
	g.Expect(db.Gorm.Raw(`SELECT cardinality(?::text[])`, postgres.TextArrayForTest([]string{})).Scan(&n).Error).To(gomega.Succeed())
	g.Expect(n).To(gomega.BeZero())
}

// TestMetricsClustersMarkSharedIdentities: a cluster whose identity in the
// metrics backend (its id.openshift.io claim, or its name) another
// organisation's live cluster carries too is marked on both sides, by the
// source the scope names; an admin's clusters are left alone.
func TestMetricsClustersMarkSharedIdentities(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newMetricsEnv(t)
	ctx := context.Background()
	// org-b's copycat claims a1-x's id; org-c's own hub has a cluster named
	// as org-a's a2-x.
	copycat := cluster("copycat", "4.17.1")
	copycat.Claims[fleet.ClaimID] = "id-a1-x"
	copycat.Labels[fleet.LabelRegistrationID] = e.regs["b2"].ID
	namesake := cluster("a2-x", "4.17.1")
	namesake.Claims[fleet.ClaimID] = "id-namesake"
	for _, b := range []struct {
		hub     fleet.Hub
		cluster fleet.ManagedClusterSummary
	}{{e.hub2, copycat}, {e.owned, namesake}} {
		_, err := e.store.IngestInventory(ctx, b.hub.ID, b.hub.AgentIdentity, fleet.InventoryBatch{Upserts: []fleet.ManagedClusterSummary{b.cluster}})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	shared := func(scope fleet.MetricsScope) []string {
		clusters, err := e.store.MetricsClusters(ctx, scope)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "MetricsClusters(%+v)", scope)
		g.Expect(clusters).NotTo(gomega.BeEmpty(), "MetricsClusters(%+v)", scope)
		out := []string{}
		for _, c := range clusters {
			if c.SharedIdentity {
				out = append(out, c.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		org, source, registration string
		admin                     bool
		want                      []string
	}{
		{org: "org-a", source: "cluster-id", want: []string{"a1-x"}},
		{org: "org-b", source: "cluster-id", want: []string{"copycat"}},
		{org: "org-c", source: "cluster-id", want: []string{}},
		{org: "org-a", source: "name", want: []string{"a2-x"}},
		{org: "org-c", source: "name", want: []string{"a2-x"}},
		{org: "org-b", source: "name", want: []string{}},
		{org: "org-a", source: "", want: []string{}},
		{org: "org-a", source: "cluster-id", registration: "a1", want: []string{"a1-x"}},
		{org: "org-a", source: "cluster-id", registration: "a2", want: []string{}},
		{org: "ops", source: "cluster-id", admin: true, want: []string{}},
		{org: "ops", source: "name", admin: true, want: []string{}},
	} {
		scope := fleet.MetricsScope{Caller: fleet.Identity{OrgID: tc.org}, Admin: tc.admin, ClusterLabelSource: tc.source}
		if tc.registration != "" {
			scope.RegistrationID = e.regs[tc.registration].ID
		}
		g.Expect(shared(scope)).To(gomega.Equal(tc.want), "MetricsClusters(%+v): the clusters of shared identity", scope)
	}
}
