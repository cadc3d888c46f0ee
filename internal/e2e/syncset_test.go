package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/syncset/hivetest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestSyncSetHiveHubHandsOffToAgent: a hub provisioned by Hive, without an
// agent, gets a registration through a Hive SyncSet (the test hub is both the
// Hive cluster and the hub; hivetest plays Hive's clustersync controller).
// The hub then moves to the agent: the agent takes the objects over, the
// SyncSet is let go of, and the ManagedCluster is never deleted on the way.
// Deregistration then removes it through the agent.
func TestSyncSetHiveHubHandsOffToAgent(t *testing.T) {
	ctx := context.Background()
	name := "hub-e2e-hive"
	hydra, hub := hydratest.Start(t), testHub(t)
	dyn := hubtest.Dynamic(t)
	hivetest.CreateClusterDeployment(ctx, t, dyn, name, name)
	runCtx, stopHive := context.WithCancel(ctx)
	t.Cleanup(stopHive)
	hivetest.Run(runCtx, t, dyn, hivetest.NewRESTMapper(t, hub.RESTConfig()), name)

	kubeconfig, err := os.ReadFile(hub.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	fm := startFleetManager(t, hydra)
	s := &stack{t: t, g: gomega.NewWithT(t), fm: fm, hub: hub,
		admin: fm.token("sre", "bob", "fleet-admin"), user: fm.token("org-"+name, "ann")}
	created, err := fm.Admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: name, Zone: "eu", Region: "eu-west-1",
		DeliveryMode: admin.SyncsetHive, Capacity: 10,
		Hive:        &admin.HiveTarget{ClusterDeploymentNamespace: name, ClusterDeploymentName: name},
		Credentials: &admin.Credentials{fleet.CredentialHiveKubeconfig: string(kubeconfig)}}, bearer(s.admin))
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateHub(%s) = %v %s, %v", name, created.StatusCode(), created.Body, err)
	}
	s.hubID = created.JSON201.Id

	c := s.register("hived")
	mc := managedClusterName(c)
	ready := s.waitPhase(c.Id, public.Ready)
	for _, typ := range []string{fleet.ConditionJoined, fleet.ConditionAvailable} {
		s.g.Expect(conditionReason(ready, typ)).To(gomega.Equal(fleet.ReasonNoAgentOnHub), typ)
	}
	s.g.Expect(conditionReason(ready, fleet.ConditionDelivered)).To(gomega.Equal(fleet.ReasonSyncSetApplied))
	syncSets := dyn.Resource(hubkind.SyncSet.GVR()).Namespace(name)
	syncSetName := fleet.SyncSetName(fleet.Registration{ID: c.Id})
	ss, err := syncSets.Get(ctx, syncSetName, metav1.GetOptions{})
	s.g.Expect(err).NotTo(gomega.HaveOccurred(), "the registration's SyncSet")
	mode, _, _ := unstructured.NestedString(ss.Object, "spec", "resourceApplyMode")
	s.g.Expect(mode).To(gomega.Equal("Sync"))
	s.waitOnHub(mc, true)
	before, err := dyn.Resource(managedClusters).Get(ctx, mc, metav1.GetOptions{})
	s.g.Expect(err).NotTo(gomega.HaveOccurred())

	// Watch the ManagedCluster from here on: it must never be deleted.
	w, err := dyn.Resource(managedClusters).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + mc, ResourceVersion: before.GetResourceVersion()})
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	defer w.Stop()
	deleted := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				close(deleted)
				return
			}
		}
	}()

	s.creds = newAgentCredentials(t, hydra, name+"-agent")
	moved, err := fm.Admin.UpdateHubWithResponse(ctx, s.hubID, nil, admin.HubPatch{DeliveryMode: ptr(admin.Agent), AgentIdentity: &s.creds.clientID}, bearer(s.admin))
	if err != nil || moved.JSON200 == nil {
		t.Fatalf("UpdateHub(%s, agent) = %v %s, %v", name, moved.StatusCode(), moved.Body, err)
	}
	playImportController(t, startHub(t), s.hubID)
	s.agent = startAgent(t, fm, hub, s.hubID, s.creds)
	s.g.Eventually(func() bool {
		_, err := syncSets.Get(ctx, syncSetName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(gomega.BeTrue(), func() string {
		last, _ := s.cluster(c.Id)
		return "the SyncSet was never let go of; the cluster: " + describeCluster(last)
	})
	// The SyncSet goes before the pass that let go of it records the outcome.
	var handedOver public.Cluster
	s.g.Eventually(func() string {
		handedOver, _ = s.cluster(c.Id)
		return conditionReason(handedOver, fleet.ConditionDelivered)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Equal(fleet.ReasonAcknowledged))
	s.g.Expect(handedOver.Phase).To(gomega.Equal(public.Ready))
	s.g.Expect(conditionReason(handedOver, fleet.ConditionJoined)).NotTo(gomega.Equal(fleet.ReasonNoAgentOnHub))
	after, err := dyn.Resource(managedClusters).Get(ctx, mc, metav1.GetOptions{})
	s.g.Expect(err).NotTo(gomega.HaveOccurred(), "the ManagedCluster left the hub in the hand-off")
	s.g.Expect(after.GetUID()).To(gomega.Equal(before.GetUID()), "the ManagedCluster was replaced in the hand-off")
	s.g.Expect(after.GetLabels()).To(gomega.HaveKeyWithValue(fleet.LabelManagedBy, fleet.ManagedByAgent))
	select {
	case <-deleted:
		t.Fatalf("the ManagedCluster %s was deleted during the hand-off", mc)
	default:
	}

	resp, err := fm.Public.DeleteClusterWithResponse(ctx, c.Id, bearer(s.user))
	if err != nil || resp.StatusCode() != 202 {
		t.Fatalf("DeleteCluster(%s) = %v, %v", c.Id, resp.StatusCode(), err)
	}
	s.waitGone(c.Id)
	s.waitOnHub(mc, false)
}

// conditionReason returns the reason of the cluster's condition typ.
func conditionReason(c public.Cluster, typ string) string {
	for _, cond := range c.Conditions {
		if cond.Type == typ {
			return cond.Reason
		}
	}
	return ""
}
