package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// joinTimeout bounds each wait on OCM's programs and the agent: a managed
// cluster's first certificate, status and lease take a few of the agents'
// periods on a busy machine, and the agent's report a heartbeat more.
const joinTimeout = 3 * time.Minute

// The finalizers OCM's registration controller puts on every ManagedCluster
// it manages: its managed-cluster controller's, and its GC controller's
// (the ResourceCleanup feature gate, on by default).
var ocmFinalizers = []string{
	"cluster.open-cluster-management.io/api-resource-cleanup",
	"cluster.open-cluster-management.io/resource-cleanup",
}

// TestRegistrationEndToEndWithRealOCM: register through the API; the agent
// puts the hub objects on a hub that runs OCM's own controllers; a managed
// cluster's klusterlet joins it; OCM's registration controller and agent
// make the ManagedCluster accepted, joined and available, the agent reports
// it and the registration turns ready; deregister, the klusterlet is
// detached, OCM's controller releases the ManagedCluster and the
// registration is gone. Nothing of OCM is played but what ocmtest's package
// comment names and RHACM's import controller, below.
func TestRegistrationEndToEndWithRealOCM(t *testing.T) {
	hydra := hydratest.Start(t)
	ocm := startHub(t).OCM()
	hub := ocm.Hub()
	hubDyn := hub.NewDynamicFor(t)
	fm := startFleetManager(t, hydra)
	ctx := context.Background()
	adminToken, user := fm.token("sre", "bob", "fleet-admin"), fm.token("org-realocm", "ann")

	agentID := "realocm-agent"
	created, err := fm.Admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "hub-realocm", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: admin.Agent, Capacity: 10, AgentIdentity: &agentID}, bearer(adminToken))
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateHub = %v %s, %v", created.StatusCode(), created.Body, err)
	}
	hubID := created.JSON201.Id
	startAgent(t, fm, hub, hubID, newAgentCredentials(t, hydra, agentID))
	waitUntil(t, time.Minute, "the hub Ready", func() error {
		resp, err := fm.Admin.GetHubWithResponse(ctx, hubID, bearer(adminToken))
		if err != nil || resp.JSON200 == nil {
			return fmt.Errorf("GetHub: %v", err)
		}
		for _, c := range resp.JSON200.Conditions {
			if c.Type == fleet.ConditionHubReady && string(c.Status) == string(fleet.ConditionTrue) {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", resp.JSON200.Conditions)
	})

	resp, err := fm.Public.CreateClusterWithResponse(ctx, nil, public.ClusterCreate{Name: "real", Zone: ptr("eu"),
		Product: public.ROSA, Labels: &public.Labels{"env": "e2e"},
		Credentials: &public.ImportCredentials{ApiUrl: ptr("https://api.real.example.com:6443"), Token: ptr("sha256~real")}}, bearer(user))
	if err != nil || resp.JSON202 == nil {
		t.Fatalf("CreateCluster = %v %s, %v", resp.StatusCode(), resp.Body, err)
	}
	reg := *resp.JSON202
	name := fleet.ManagedClusterName(fleet.Registration{ID: reg.Id, Name: reg.Name})
	getCluster := func() (public.Cluster, int) {
		r, err := fm.Public.GetClusterWithResponse(ctx, reg.Id, bearer(user))
		if err != nil {
			return public.Cluster{}, 0
		}
		if r.JSON200 == nil {
			return public.Cluster{}, r.StatusCode()
		}
		return *r.JSON200, http.StatusOK
	}

	// Placed and delivered: the agent's objects on the hub.
	var mc *unstructured.Unstructured
	waitUntil(t, time.Minute, "the agent's ManagedCluster, KlusterletAddonConfig and auto-import secret", func() error {
		if mc, err = hubDyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := hubDyn.Resource(hubkind.KlusterletAddonConfig.GVR()).Namespace(name).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := hubDyn.Resource(hubkind.Secret.GVR()).Namespace(name).Get(ctx, fleet.AutoImportSecretName, metav1.GetOptions{})
		return err
	})
	if accepts, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); !accepts {
		t.Fatalf("ManagedCluster %s spec %v, want hubAcceptsClient true", name, mc.Object["spec"])
	}

	// OCM's registration controller accepts the cluster at once, before
	// any klusterlet: the agent reports it accepted but not joined, and
	// the registration stays provisioning.
	waitUntil(t, joinTimeout, "the registration accepted on the hub, not joined", func() error {
		got, err := hubDyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if reason := hubCondition(got, fleet.HubConditionAccepted); reason != "True/HubClusterAdminAccepted" {
			return fmt.Errorf("hub condition %s %q", fleet.HubConditionAccepted, reason)
		}
		c, code := getCluster()
		joinedCond := slices.IndexFunc(c.Conditions, func(c public.Condition) bool { return c.Type == agent.ConditionJoined })
		if code != http.StatusOK || c.Phase != public.Provisioning || joinedCond < 0 ||
			string(c.Conditions[joinedCond].Status) != string(fleet.ConditionUnknown) || c.Conditions[joinedCond].Reason != agent.ReasonNotReported {
			return fmt.Errorf("GetCluster %d: %s", code, describeCluster(c))
		}
		return nil
	})

	// RHACM's import controller (not served) would now read the
	// auto-import secret and deploy the klusterlet on the cluster it names;
	// the test plays that step alone: it starts the klusterlet's agents on a
	// managed cluster of its own, bootstrapped to the hub.
	cluster := ocm.Join(t, name)
	managedKube, err := kubernetes.NewForConfig(cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	managedVersion, err := managedKube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	joined := func(what string, check func() error) {
		t.Helper()
		waitUntil(t, joinTimeout, what, func() error {
			if err := ocm.Err(); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			if err := cluster.Err(); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			return check()
		})
	}

	// OCM's registration controller and agent take it through accepted,
	// joined and available; the agent reports it; the registration is ready.
	var ready public.Cluster
	joined("the registration ready", func() error {
		c, code := getCluster()
		if code != http.StatusOK || c.Phase != public.Ready {
			return fmt.Errorf("GetCluster %d: %s", code, describeCluster(c))
		}
		ready = c
		return nil
	})
	if ready.Hub == nil || ready.Hub.Id != hubID {
		t.Errorf("ready cluster's hub = %+v, want %s", ready.Hub, hubID)
	}
	// The reasons are OCM's registration controller's and agent's, as the
	// agent mirrors them.
	for typ, reason := range map[string]string{agent.ConditionJoined: "ManagedClusterJoined", agent.ConditionAvailable: "ManagedClusterAvailable"} {
		i := slices.IndexFunc(ready.Conditions, func(c public.Condition) bool { return c.Type == typ })
		if i < 0 || ready.Conditions[i].Reason != reason {
			t.Errorf("condition %s of the ready registration: %s, want reason %s", typ, describeCluster(ready), reason)
		}
	}
	mc, err = hubDyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ocmFinalizers {
		if !slices.Contains(mc.GetFinalizers(), f) {
			t.Errorf("ManagedCluster finalizers %v lack OCM's %s", mc.GetFinalizers(), f)
		}
	}
	if mc.GetLabels()[fleet.LabelRegistrationID] != reg.Id || mc.GetLabels()["env"] != "e2e" {
		t.Errorf("ManagedCluster labels %v lost the registration's", mc.GetLabels())
	}
	// The agent's inventory carries what OCM's agent read from the cluster.
	joined("the inventory's ManagedCluster joined and available", func() error {
		inv, err := fm.Public.ListManagedClustersWithResponse(ctx, &public.ListManagedClustersParams{Search: ptr("name = '" + name + "'")}, bearer(user))
		if err != nil || inv.JSON200 == nil || inv.JSON200.Total != 1 {
			return fmt.Errorf("ListManagedClusters = %s, %v", inv.Body, err)
		}
		got := inv.JSON200.Items[0]
		if deref(got.RegistrationId) != reg.Id || got.Joined != public.ManagedClusterJoinedTrue ||
			got.Available != public.ManagedClusterAvailableTrue || deref(got.KubernetesVersion) != managedVersion.GitVersion {
			return fmt.Errorf("inventory item %s", inv.Body)
		}
		return nil
	})

	// Deregister. The agent deletes the ManagedCluster; RHACM's import
	// controller would then remove the klusterlet from the cluster before
	// letting it go: the test stops the klusterlet's agents once the
	// deletion has begun. OCM's registration controller removes its
	// finalizers; the registration is gone.
	if d, err := fm.Public.DeleteClusterWithResponse(ctx, reg.Id, bearer(user)); err != nil || d.StatusCode() >= 300 {
		t.Fatalf("DeleteCluster = %v, %v", d.StatusCode(), err)
	}
	waitUntil(t, joinTimeout, "the ManagedCluster's deletion", func() error {
		got, err := hubDyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if got.GetDeletionTimestamp() == nil {
			return fmt.Errorf("ManagedCluster %s not deleted yet", name)
		}
		return nil
	})
	cluster.StopAgents()
	waitUntil(t, joinTimeout, "the ManagedCluster gone from the hub", func() error {
		got, err := hubDyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("ManagedCluster %s still there, finalizers %v", name, got.GetFinalizers())
	})
	waitUntil(t, joinTimeout, "the registration gone", func() error {
		if c, code := getCluster(); code != http.StatusNotFound {
			return fmt.Errorf("GetCluster %d: %s", code, describeCluster(c))
		}
		return nil
	})
	if err := ocm.Err(); err != nil {
		t.Errorf("after the deregistration: %v", err)
	}
}

// hubCondition returns "status/reason" of the hub condition typ of mc, or
// "" when the hub has not set it.
func hubCondition(mc *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return fmt.Sprintf("%v/%v", m["status"], m["reason"])
		}
	}
	return ""
}

// waitUntil polls check until it passes, failing the test at timeout with
// check's last error.
func waitUntil(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		}
		<-tick.C
	}
}
