package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/governancetest"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// stack is one fleet manager, one hub registered in it, its agent, and the
// stand-in for RHACM's import controller on that hub.
type stack struct {
	t     *testing.T
	g     gomega.Gomega
	fm    *fleetManager
	hub   *hubtest.Hub
	hubID string
	creds agentCredentials
	agent *runningAgent
	// imports is the stand-in for RHACM's import controller on the hub.
	imports *importController
	admin   string
	user    string
}

func newStack(t *testing.T, name string) *stack {
	t.Helper()
	return newStackArgs(t, name)
}

// newStackArgs is newStack with fleet-manager serving with extra flags.
func newStackArgs(t *testing.T, name string, extra ...string) *stack {
	t.Helper()
	hydra := hydratest.Start(t)
	hub := testHub(t)
	return newStackOn(t, name, hydra, hub, startFleetManager(t, hydra, extra...))
}

// newStackOn is newStack around a fleet manager already serving.
func newStackOn(t *testing.T, name string, hydra *hydratest.Hydra, hub *hubtest.Hub, fm *fleetManager) *stack {
	t.Helper()
	return newStackOnWith(t, name, hydra, hub, fm, playImportController)
}

// newStackOnWith is newStackOn with the import controller stand-in
// started by importer.
func newStackOnWith(t *testing.T, name string, hydra *hydratest.Hydra, hub *hubtest.Hub, fm *fleetManager,
	importer func(*testing.T, *governancetest.Hub, string) *importController) *stack {
	t.Helper()
	s := &stack{t: t, g: gomega.NewWithT(t), fm: fm, hub: hub,
		admin: fm.token("sre", "bob", "fleet-admin"), user: fm.token("org-"+name, "ann")}
	s.creds = newAgentCredentials(t, hydra, name+"-agent")
	resp, err := fm.Admin.CreateHubWithResponse(context.Background(), admin.HubCreate{Name: name, Zone: "eu", Region: "eu-west-1",
		DeliveryMode: admin.Agent, Capacity: 100, AgentIdentity: &s.creds.clientID}, bearer(s.admin))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateHub(%s) = %v %s, %v", name, resp.StatusCode(), resp.Body, err)
	}
	s.hubID = resp.JSON201.Id
	s.imports = importer(t, startHub(t), s.hubID)
	s.agent = startAgent(t, fm, hub, s.hubID, s.creds)
	s.waitHubReady(fleet.ConditionTrue)
	return s
}

func (s *stack) waitHubReady(want fleet.ConditionStatus) {
	s.t.Helper()
	s.g.Eventually(func() string {
		resp, err := s.fm.Admin.GetHubWithResponse(context.Background(), s.hubID, bearer(s.admin))
		if err != nil || resp.JSON200 == nil {
			return ""
		}
		for _, c := range resp.JSON200.Conditions {
			if c.Type == fleet.ConditionHubReady {
				return string(c.Status)
			}
		}
		return ""
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(gomega.Equal(string(want)), "hub Ready")
}

func (s *stack) register(name string) public.Cluster {
	s.t.Helper()
	resp, err := s.fm.Public.CreateClusterWithResponse(context.Background(), nil, public.ClusterCreate{Name: name, Zone: ptr("eu"),
		Product: public.ROSA, Labels: &public.Labels{"env": "e2e"},
		Credentials: &public.ImportCredentials{ApiUrl: ptr("https://api." + name + ".example.com:6443"), Token: ptr("sha256~" + name)}}, bearer(s.user))
	if err != nil || resp.JSON202 == nil {
		s.t.Fatalf("CreateCluster(%s) = %v %s, %v", name, resp.StatusCode(), resp.Body, err)
	}
	return *resp.JSON202
}

func (s *stack) cluster(id string) (public.Cluster, int) {
	resp, err := s.fm.Public.GetClusterWithResponse(context.Background(), id, bearer(s.user))
	if err != nil {
		return public.Cluster{}, 0
	}
	if resp.JSON200 == nil {
		return public.Cluster{}, resp.StatusCode()
	}
	return *resp.JSON200, http.StatusOK
}

func (s *stack) waitPhase(id string, phase public.ClusterPhase) public.Cluster {
	s.t.Helper()
	var last public.Cluster
	s.g.Eventually(func() public.ClusterPhase {
		last, _ = s.cluster(id)
		return last.Phase
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(gomega.Equal(phase), func() string { return fmt.Sprintf("cluster %s phase; last: %s", id, describeCluster(last)) })
	return last
}

// describeCluster renders a cluster's phase and conditions for a failure message.
func describeCluster(c public.Cluster) string {
	s := fmt.Sprintf("phase %s", c.Phase)
	for _, cond := range c.Conditions {
		s += fmt.Sprintf("; %s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, deref(cond.Message))
	}
	return s
}

func (s *stack) waitGone(id string) {
	s.t.Helper()
	s.g.Eventually(func() int { _, code := s.cluster(id); return code }).WithTimeout(60*time.Second).
		WithPolling(200*time.Millisecond).Should(gomega.Equal(http.StatusNotFound), "cluster %s never went away", id)
}

// onHub reports whether the hub has the ManagedCluster name.
func (s *stack) onHub(name string) bool {
	_, err := hubtest.Dynamic(s.t).Resource(managedClusters).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}

func (s *stack) waitOnHub(name string, want bool) {
	s.t.Helper()
	s.g.Eventually(func() bool { return s.onHub(name) }).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(want), "ManagedCluster %s on the hub", name)
}

func managedClusterName(c public.Cluster) string {
	return fleet.ManagedClusterName(fleet.Registration{ID: c.Id, Name: c.Name})
}

// TestRegistrationEndToEnd: register through the API; the hub objects appear;
// the hub accepts the cluster; the registration becomes ready and its import
// material is served; deregister; the objects leave the hub; it is gone.
func TestRegistrationEndToEnd(t *testing.T) {
	s := newStack(t, "hub-e2e-life")
	ctx := context.Background()
	c := s.register("life")
	name := managedClusterName(c)
	s.waitOnHub(name, true)
	dyn := hubtest.Dynamic(t)
	for _, check := range []struct {
		what string
		get  func() error
	}{
		{"namespace", func() error { _, err := dyn.Resource(namespaces).Get(ctx, name, metav1.GetOptions{}); return err }},
		{"KlusterletAddonConfig", func() error {
			_, err := dyn.Resource(addonConfigs).Namespace(name).Get(ctx, name, metav1.GetOptions{})
			return err
		}},
		{"auto-import secret", func() error {
			_, err := dyn.Resource(secretsGVR).Namespace(name).Get(ctx, fleet.AutoImportSecretName, metav1.GetOptions{})
			return err
		}},
	} {
		s.g.Eventually(check.get).WithTimeout(30*time.Second).Should(gomega.Succeed(), "%s of %s on the hub", check.what, name)
	}
	mc, err := dyn.Resource(managedClusters).Get(ctx, name, metav1.GetOptions{})
	if err != nil || mc.GetLabels()["env"] != "e2e" || mc.GetLabels()[fleet.LabelRegistrationID] != c.Id {
		t.Errorf("ManagedCluster %s labels = %v, %v", name, mc.GetLabels(), err)
	}

	ready := s.waitPhase(c.Id, public.Ready)
	if ready.Hub == nil || ready.Hub.Id != s.hubID {
		t.Errorf("ready cluster's hub = %+v, want %s", ready.Hub, s.hubID)
	}
	s.g.Eventually(func() string {
		resp, err := s.fm.Public.GetClusterImportWithResponse(ctx, c.Id, bearer(s.user))
		if err != nil || resp.JSON200 == nil {
			return ""
		}
		return resp.JSON200.Manifests
	}).WithTimeout(30*time.Second).Should(gomega.ContainSubstring("import manifests of "+name), "import material")
	other, err := s.fm.Public.GetClusterImportWithResponse(ctx, c.Id, bearer(s.fm.token("org-other", "eve")))
	if err != nil || other.StatusCode() != http.StatusNotFound {
		t.Errorf("GetClusterImport(another org) = %d, %v; want 404", other.StatusCode(), err)
	}
	inv, err := s.fm.Public.ListManagedClustersWithResponse(ctx, &public.ListManagedClustersParams{Search: ptr("name = '" + name + "'")}, bearer(s.user))
	if err != nil || inv.JSON200 == nil || inv.JSON200.Total != 1 || deref(inv.JSON200.Items[0].RegistrationId) != c.Id ||
		inv.JSON200.Items[0].Available != public.ManagedClusterAvailableTrue || deref(inv.JSON200.Items[0].OpenshiftVersion) != "4.17.3" {
		t.Errorf("ListManagedClusters(%s) = %s, %v", name, inv.Body, err)
	}

	if _, err := s.fm.Public.DeleteClusterWithResponse(ctx, c.Id, bearer(s.user)); err != nil {
		t.Fatal(err)
	}
	s.waitOnHub(name, false)
	s.waitGone(c.Id)
	s.g.Eventually(func() bool {
		_, err := dyn.Resource(namespaces).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || namespaceTerminating(ctx, s, name)
	}).WithTimeout(30*time.Second).Should(gomega.BeTrue(), "namespace %s removed", name)
}

// namespaceTerminating: with no controller-manager on the test hub, a deleted
// namespace stays Terminating; the agent's delete is what the test checks.
func namespaceTerminating(ctx context.Context, s *stack, name string) bool {
	ns, err := hubtest.Dynamic(s.t).Resource(namespaces).Get(ctx, name, metav1.GetOptions{})
	return err == nil && ns.GetDeletionTimestamp() != nil
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
