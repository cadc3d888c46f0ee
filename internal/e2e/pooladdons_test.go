package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/provisiontest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestPoolAddOnsWithRealWorkAgent: a capacity pool of one cluster through
// the API; provisiontest plays Hive's install only; once the cluster is
// installed a klusterlet joins the hub for it (what RHACM's import
// controller would deploy), and OCM's real work agent applies the pool's
// add-on ManifestWorks to the managed cluster's API server. The pool
// cluster's add_ons report what that agent reported: applied, and refused
// with the cause the managed cluster gave for a kind it does not serve and
// for an object its API server finds invalid.
func TestPoolAddOnsWithRealWorkAgent(t *testing.T) {
	hydra := hydratest.Start(t)
	ocm := startHub(t).OCM()
	hub := ocm.Hub()
	hubDyn := hub.NewDynamicFor(t)
	fm := startFleetManager(t, hydra, "--pool-resync-interval=300ms", "--pool-base-domain=pools.realocm.example.com")
	ctx := context.Background()
	adminToken, user := fm.token("sre", "bob", "fleet-admin"), fm.token("org-realocm-pools", "ann")

	agentID := "realocm-pools-agent"
	created, err := fm.Admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "hub-realocm-pools", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: admin.Agent, Capacity: 10, AgentIdentity: &agentID}, bearer(adminToken))
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateHub = %v %s, %v", created.StatusCode(), created.Body, err)
	}
	startAgent(t, fm, hub, created.JSON201.Id, newAgentCredentials(t, hydra, agentID))

	// Hive's install is played; RHACM's import is the klusterlet below,
	// started by the test's goroutine (Join fails the test on error).
	imports := make(chan string, 64)
	opts := provisiontest.DefaultOptions()
	opts.Import = func(_ context.Context, cluster string) { imports <- cluster }
	provisiontest.Play(t, hubDyn, opts)

	spec := public.BlueprintSpec{Release: "4.16.3", ControlPlaneSize: public.SizeMedium, MachinePools: []public.MachinePool{
		{Name: "workers", Size: public.SizeLarge, Replicas: ptr(2)},
	}, AddOns: &[]public.AddOn{{Name: "observability", Manifests: []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": "observability"},
			"data": map[string]any{"retention": "7d"}},
	}}, {Name: "team-monitors", Manifests: []map[string]any{
		// The managed cluster has no Prometheus operator: no such kind.
		{"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": map[string]any{"name": "kafka", "namespace": "observability"}},
	}}, {Name: "bad-service", Manifests: []map[string]any{
		// A kind the cluster serves, with a port its API server refuses.
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "metrics", "namespace": "default"},
			"spec": map[string]any{"ports": []any{map[string]any{"port": 0}}}},
	}}}}
	bp, err := fm.Public.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "kafka", Spec: spec}, bearer(user))
	if err != nil || bp.JSON201 == nil {
		t.Fatalf("CreateBlueprint = %d %s, %v", bp.StatusCode(), bp.Body, err)
	}
	pool, err := fm.Public.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: "kafka-eu", BlueprintId: bp.JSON201.Id,
		BlueprintVersion: 1, Cloud: public.CloudAWS, Region: "eu-west-1", Zone: ptr("eu"), MinClusters: 1, MaxClusters: 1, UnitsPerCluster: 40,
		Credentials: public.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "AKIAREALOCM", "aws_secret_access_key": "realocm-secret"},
			PullSecret: `{"auths":{}}`}}, bearer(user))
	if err != nil || pool.JSON201 == nil {
		t.Fatalf("CreateCapacityPool = %d %s, %v", pool.StatusCode(), pool.Body, err)
	}
	poolClusters := func() []public.PoolCluster {
		resp, err := fm.Public.ListCapacityPoolClustersWithResponse(ctx, pool.JSON201.Id, &public.ListCapacityPoolClustersParams{}, bearer(user))
		if err != nil || resp.JSON200 == nil {
			return nil
		}
		return resp.JSON200.Items
	}

	// The hub is shared: provisiontest reports every installed pool
	// cluster on it, this pool's and what other tests left.
	var name string
	for timeout := time.After(joinTimeout); name == ""; {
		select {
		case installed := <-imports:
			cd, err := hubDyn.Resource(hubkind.ClusterDeployment.GVR()).Namespace(installed).Get(ctx, installed, metav1.GetOptions{})
			if err == nil && cd.GetLabels()[fleet.LabelPoolID] == pool.JSON201.Id {
				name = installed
			}
		case <-timeout:
			t.Fatalf("no ClusterDeployment of the pool installed within %s; pool clusters %+v", joinTimeout, poolClusters())
		}
	}
	cluster := ocm.Join(t, name)
	managedKube, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	agentsRun := func() {
		t.Helper()
		if err := ocm.Err(); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Err(); err != nil {
			t.Fatal(err)
		}
	}

	addOns := map[string]string{}
	messages, available := map[string]string{}, map[string]string{}
	waitUntil(t, joinTimeout, "the pool cluster ready with its add-ons' status", func() error {
		agentsRun()
		cs := poolClusters()
		if len(cs) != 1 || fleet.ManagedClusterName(fleet.Registration{ID: cs[0].Id, Name: cs[0].Name}) != name {
			return fmt.Errorf("pool clusters %+v, want %s", cs, name)
		}
		if cs[0].State != public.PoolClusterReady || cs[0].AddOns == nil {
			return fmt.Errorf("pool cluster %s state %s, add-ons %+v", name, cs[0].State, cs[0].AddOns)
		}
		clear(addOns)
		for _, a := range *cs[0].AddOns {
			addOns[a.Name] = string(a.Applied) + "/" + a.Reason
			messages[a.Name], available[a.Name] = a.Message, string(a.Available)
		}
		want := map[string]string{"observability": "True/AppliedManifestWorkComplete",
			"team-monitors": "False/AppliedManifestWorkFailed", "bad-service": "False/AppliedManifestWorkFailed"}
		if fmt.Sprint(addOns) != fmt.Sprint(want) {
			return fmt.Errorf("add-ons %v, want %v", addOns, want)
		}
		// The work agent's Available, once its status controller has looked.
		if available["observability"] != "True" {
			return fmt.Errorf("add-on observability available %q", available["observability"])
		}
		return nil
	})
	t.Logf("add-ons as the work agent reported them: %v; available %v; messages %q", addOns, available, messages)
	// The message of a refused add-on is the manifest's, with the managed
	// cluster's cause, not the ManifestWork's summary.
	for addOn, wants := range map[string][]string{
		"team-monitors": {"Failed to apply manifest", `the server doesn't have a resource type "ServiceMonitor"`},
		"bad-service":   {"Failed to apply manifest", `Service "metrics" is invalid`, "spec.ports[0].port"},
	} {
		for _, want := range wants {
			if !strings.Contains(messages[addOn], want) {
				t.Errorf("add-on %s message %q, want it to contain %q", addOn, messages[addOn], want)
			}
		}
	}
	if messages["observability"] != "Apply manifest work complete" {
		t.Errorf("add-on observability message %q, want the work agent's", messages["observability"])
	}

	// The real work agent put them on the managed cluster's API server.
	cm, err := managedKube.CoreV1().ConfigMaps("observability").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["retention"] != "7d" {
		t.Fatalf("the add-on's ConfigMap on the managed cluster: %v, %v", cm, err)
	}
	// And reported their resource status and availability on the hub.
	waitUntil(t, joinTimeout, "the work agent's Available and resource status", func() error {
		agentsRun()
		w, err := hubDyn.Resource(hubkind.ManifestWork.GVR()).Namespace(name).Get(ctx, "addon-observability", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := condition(w.Object, "status", "conditions", "Available"); c != "True/ResourcesAvailable" {
			return fmt.Errorf("Available %q; status %v", c, w.Object["status"])
		}
		manifests, _, _ := unstructured.NestedSlice(w.Object, "status", "resourceStatus", "manifests")
		if len(manifests) != 2 {
			return fmt.Errorf("resource status of %d manifests, want 2: %v", len(manifests), w.Object["status"])
		}
		for _, m := range manifests {
			m, _ := m.(map[string]any)
			if c := condition(m, "conditions", "Applied"); !strings.HasPrefix(c, "True/") {
				return fmt.Errorf("manifest %v Applied %q", m["resourceMeta"], c)
			}
		}
		return nil
	})
}

// condition returns "status/reason" of the condition typ in the list at
// path in obj, or "".
func condition(obj map[string]any, path ...string) string {
	typ := path[len(path)-1]
	conds, _, _ := unstructured.NestedSlice(obj, path[:len(path)-1]...)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return fmt.Sprintf("%v/%v", m["status"], m["reason"])
		}
	}
	return ""
}
