package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/provisiontest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// poolClusters reads a pool's clusters through the API, by name.
func (s *stack) poolClusters(poolID string) []public.PoolCluster {
	resp, err := s.fm.Public.ListCapacityPoolClustersWithResponse(context.Background(), poolID,
		&public.ListCapacityPoolClustersParams{OrderBy: ptr("name")}, bearer(s.user))
	if err != nil || resp.JSON200 == nil {
		return nil
	}
	return resp.JSON200.Items
}

// describePool renders a pool's clusters for a failure message.
func describePool(clusters []public.PoolCluster) string {
	var out []string
	for _, c := range clusters {
		mp := ""
		for _, m := range c.MachinePools {
			mp += fmt.Sprintf(" %s=%d/%v", m.Name, m.Replicas, derefInt(m.Nodes))
		}
		out = append(out, fmt.Sprintf("%s %s %d/%d units%s", c.Name, c.State, c.ReservedUnits, c.CapacityUnits, mp))
	}
	return strings.Join(out, "; ")
}

func derefInt(p *int) any {
	if p == nil {
		return "-"
	}
	return *p
}

// states counts a pool's clusters by state.
func states(clusters []public.PoolCluster) map[public.PoolClusterState]int {
	out := map[public.PoolClusterState]int{}
	for _, c := range clusters {
		out[c.State]++
	}
	return out
}

// TestCapacityPoolEndToEnd: through the fleet-manager and agent binaries,
// with provisiontest playing Hive and RHACM's import on the test hub, a pool
// of min 2, max 4 comes up with its add-ons; bookings fill it, a cluster's
// nodes scale, a third cluster is added; releases empty it and it shrinks
// back to 2; deleting it deprovisions every cluster and every Hive object
// leaves the hub.
func TestCapacityPoolEndToEnd(t *testing.T) {
	s := newStackArgs(t, "hub-e2e-pools", "--pool-resync-interval=300ms", "--pool-idle-time=2s", "--pool-scale-cooldown=1s",
		"--pool-base-domain=pools.e2e.example.com")
	opts := provisiontest.DefaultOptions()
	opts.Deprovision = 2 * time.Second             // long enough to see the pool wait for it
	opts.RefusedKinds = []string{"ServiceMonitor"} // the clusters lack the Prometheus operator
	provisiontest.Play(t, hubtest.Dynamic(t), opts)
	ctx := context.Background()
	dyn := hubtest.Dynamic(t)
	user := bearer(s.user)

	spec := public.BlueprintSpec{Release: "4.16.3", ControlPlaneSize: public.SizeMedium, MachinePools: []public.MachinePool{
		{Name: "infra", Size: public.SizeSmall, Replicas: ptr(1)},
		{Name: "workers", Size: public.SizeLarge, Autoscaling: &struct {
			MaxReplicas int `json:"max_replicas"`
			MinReplicas int `json:"min_replicas"`
		}{MaxReplicas: 4, MinReplicas: 2}},
	}, AddOns: &[]public.AddOn{{Name: "observability", Manifests: []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}},
	}}, {Name: "team-monitors", Manifests: []map[string]any{
		{"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": map[string]any{"name": "kafka", "namespace": "observability"}},
	}}}}
	bp, err := s.fm.Public.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "kafka", Spec: spec}, user)
	if err != nil || bp.JSON201 == nil {
		t.Fatalf("CreateBlueprint = %d %s, %v", bp.StatusCode(), bp.Body, err)
	}
	// 40 units at 4 workers: 2 workers hold 20.
	created, err := s.fm.Public.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: "kafka-eu", BlueprintId: bp.JSON201.Id,
		BlueprintVersion: 1, Cloud: public.CloudAWS, Region: "eu-west-1", Zone: ptr("eu"), MinClusters: 2, MaxClusters: 4, UnitsPerCluster: 40,
		Credentials: public.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "AKIAE2E", "aws_secret_access_key": "e2e-secret"},
			PullSecret: `{"auths":{}}`}}, user)
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateCapacityPool = %d %s, %v", created.StatusCode(), created.Body, err)
	}
	pool := *created.JSON201
	waitPool := func(what string, timeout time.Duration, match func([]public.PoolCluster) bool) []public.PoolCluster {
		t.Helper()
		var last []public.PoolCluster
		s.g.Eventually(func() bool { last = s.poolClusters(pool.Id); return match(last) }).WithTimeout(timeout).
			WithPolling(200*time.Millisecond).Should(gomega.BeTrue(), func() string { return what + "; last: " + describePool(last) })
		return last
	}

	// The minimum comes up: Hive installs, RHACM imports, the add-ons go.
	clusters := waitPool("2 clusters ready", 90*time.Second, func(cs []public.PoolCluster) bool {
		return len(cs) == 2 && states(cs)[public.PoolClusterReady] == 2
	})
	for _, c := range clusters {
		name := fleet.ManagedClusterName(fleet.Registration{ID: c.Id, Name: c.Name})
		cd, err := dyn.Resource(hubkind.ClusterDeployment.GVR()).Namespace(name).Get(ctx, name, metav1.GetOptions{})
		s.g.Expect(err).NotTo(gomega.HaveOccurred())
		s.g.Expect(cd.Object["spec"]).To(gomega.HaveKeyWithValue("baseDomain", "pools.e2e.example.com"))
		s.g.Expect(c.ApiUrl).NotTo(gomega.BeNil(), "the ClusterDeployment's URL, as the hub reports it")
		s.g.Expect(*c.ApiUrl).To(gomega.Equal("https://api." + name + ".pools.e2e.example.com:6443"))
		s.g.Eventually(func() error {
			_, err := dyn.Resource(hubkind.ManifestWork.GVR()).Namespace(name).Get(ctx, "addon-observability", metav1.GetOptions{})
			return err
		}).WithTimeout(30*time.Second).Should(gomega.Succeed(), "the add-on ManifestWork of %s", name)
	}
	// What the work agent applied, and refused, comes back with each cluster.
	addOns := func(c public.PoolCluster) string {
		out := ""
		if c.AddOns != nil {
			for _, a := range *c.AddOns {
				out += fmt.Sprintf("%s=%s/%s ", a.Name, a.Applied, a.Reason)
			}
		}
		return out
	}
	waitPool("the add-ons' status reported", 60*time.Second, func(cs []public.PoolCluster) bool {
		for _, c := range cs {
			if addOns(c) != "observability=True/AppliedManifestComplete team-monitors=False/AppliedManifestFailed " {
				return false
			}
		}
		return len(cs) == 2
	})

	book := func(units int) public.Reservation {
		t.Helper()
		resp, err := s.fm.Public.CreateReservationWithResponse(ctx, pool.Id, public.ReservationCreate{Units: units}, user)
		if err != nil || resp.JSON201 == nil {
			t.Fatalf("CreateReservation(%d) = %d %s, %v", units, resp.StatusCode(), resp.Body, err)
		}
		return *resp.JSON201
	}
	// 17 of the 20 units 2 workers hold: the cluster gets a third worker,
	// in its MachinePool on the hub, and the hub reports 3 nodes.
	first := book(17)
	workers := func(c public.PoolCluster) (int, any) {
		for _, m := range c.MachinePools {
			if m.Name == "workers" {
				return m.Replicas, derefInt(m.Nodes)
			}
		}
		return 0, nil
	}
	waitPool("the booked cluster scaled to 3 workers", 60*time.Second, func(cs []public.PoolCluster) bool {
		for _, c := range cs {
			if r, n := workers(c); c.Id == first.ClusterId && r == 3 && n == 3 && c.State == public.PoolClusterReady {
				return true
			}
		}
		return false
	})
	name := ""
	for _, c := range clusters {
		if c.Id == first.ClusterId {
			name = fleet.ManagedClusterName(fleet.Registration{ID: c.Id, Name: c.Name})
		}
	}
	mp, err := dyn.Resource(hubkind.MachinePool.GVR()).Namespace(name).Get(ctx, name+"-workers", metav1.GetOptions{})
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	s.g.Expect(mp.Object["spec"]).To(gomega.HaveKeyWithValue("replicas", gomega.BeEquivalentTo(3)))

	// Both clusters past the add threshold (90% of 40): a third is added.
	rest := []public.Reservation{first, book(20), book(37)}
	waitPool("a third cluster ready", 90*time.Second, func(cs []public.PoolCluster) bool {
		return len(cs) == 3 && states(cs)[public.PoolClusterReady] == 3
	})

	// Released, the pool shrinks back to its minimum after the idle time.
	for _, r := range rest {
		resp, err := s.fm.Public.DeleteReservationWithResponse(ctx, pool.Id, r.Id, user)
		if err != nil || resp.StatusCode() != http.StatusNoContent {
			t.Fatalf("DeleteReservation = %d %s, %v", resp.StatusCode(), resp.Body, err)
		}
	}
	waitPool("back to 2 clusters", 90*time.Second, func(cs []public.PoolCluster) bool {
		return len(cs) == 2 && states(cs)[public.PoolClusterReady] == 2
	})
	events, err := s.fm.Public.ListCapacityPoolEventsWithResponse(ctx, pool.Id, &public.ListCapacityPoolEventsParams{Size: ptr(100)}, user)
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	seen := map[string]bool{}
	for _, e := range events.JSON200.Items {
		seen[e.Type+"/"+e.Reason] = true
	}
	for _, want := range []string{"ClusterAdded/BelowMinimum", "AddOnsDelivered/ClusterJoined", "NodesScaledUp/ThresholdReached",
		"ClusterAdded/PoolFull", "ClusterRemoved/Idle"} {
		s.g.Expect(seen).To(gomega.HaveKey(want), "pool events: %v", seen)
	}

	// Deleted, the pool deprovisions its clusters and goes; no Hive object
	// of it is left on the hub.
	del, err := s.fm.Public.DeleteCapacityPoolWithResponse(ctx, pool.Id, nil, user)
	if err != nil || del.StatusCode() != http.StatusAccepted {
		t.Fatalf("DeleteCapacityPool = %d %s, %v", del.StatusCode(), del.Body, err)
	}
	// While Hive deprovisions them, the pool is deleting and lists them.
	waitPool("both clusters deprovisioning", 60*time.Second, func(cs []public.PoolCluster) bool {
		return len(cs) == 2 && states(cs)[public.PoolClusterDeprovisioning] == 2
	})
	deleting, err := s.fm.Public.GetCapacityPoolWithResponse(ctx, pool.Id, user)
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	s.g.Expect(deleting.JSON200).NotTo(gomega.BeNil(), "the pool answers until its clusters are deprovisioned")
	s.g.Expect(deleting.JSON200.Phase).To(gomega.Equal(public.CapacityPoolDeleting))
	s.g.Eventually(func() int {
		resp, err := s.fm.Public.GetCapacityPoolWithResponse(ctx, pool.Id, user)
		if err != nil {
			return 0
		}
		return resp.StatusCode()
	}).WithTimeout(90*time.Second).WithPolling(200*time.Millisecond).Should(gomega.Equal(http.StatusNotFound), "the deleted pool")
	selector := metav1.ListOptions{LabelSelector: fleet.LabelPoolID + "=" + pool.Id}
	for _, k := range []hubkind.Kind{hubkind.ClusterDeployment, hubkind.MachinePool, hubkind.ClusterImageSet, hubkind.ManagedCluster} {
		list, err := dyn.Resource(k.GVR()).List(ctx, selector)
		s.g.Expect(err).NotTo(gomega.HaveOccurred())
		s.g.Expect(names(list.Items)).To(gomega.BeEmpty(), "%s of the deleted pool on the hub", k.Kind)
	}
}

func names(items []unstructured.Unstructured) []string {
	out := []string{}
	for _, o := range items {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	return out
}
