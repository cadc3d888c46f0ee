package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// inventory returns the admin's view of the inventory rows named name.
func (s *stack) inventory(name string) []public.ManagedCluster {
	resp, err := s.fm.Public.ListManagedClustersWithResponse(context.Background(),
		&public.ListManagedClustersParams{Search: ptr("name = '" + name + "' and hub_id = '" + s.hubID + "'")}, bearer(s.admin))
	if err != nil || resp.JSON200 == nil {
		return nil
	}
	return resp.JSON200.Items
}

// createDirect creates a ManagedCluster on the hub, outside the fleet manager.
func createDirect(t *testing.T, name string) {
	t.Helper()
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"vendor": "OpenShift"}},
		"spec":     map[string]any{"hubAcceptsClient": true},
	}}
	if _, err := hubtest.Dynamic(t).Resource(managedClusters).Create(context.Background(), mc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ManagedCluster %s on the hub: %v", name, err)
	}
	t.Cleanup(func() { deleteDirect(t, name) })
}

func deleteDirect(t *testing.T, name string) {
	_ = hubtest.Dynamic(t).Resource(managedClusters).Delete(context.Background(), name, metav1.DeleteOptions{})
}

// TestDirectManagedClusterInInventory: a ManagedCluster created directly on
// the hub appears in the inventory; deleted there, it is tombstoned.
func TestDirectManagedClusterInInventory(t *testing.T) {
	s := newStack(t, "hub-e2e-direct")
	name := "direct-" + s.hubID[len(s.hubID)-6:]
	createDirect(t, name)
	s.g.Eventually(func() int { return len(s.inventory(name)) }).WithTimeout(30*time.Second).Should(gomega.Equal(1), "inventory row of %s", name)
	row := s.inventory(name)[0]
	if row.Labels["vendor"] != "OpenShift" || row.RegistrationId != nil {
		t.Errorf("inventory row = %+v, want the hub's labels and no registration", row)
	}
	// A user of another org does not see a cluster no registration of theirs owns.
	resp, err := s.fm.Public.ListManagedClustersWithResponse(context.Background(), nil, bearer(s.user))
	if err != nil || resp.JSON200 == nil || resp.JSON200.Total != 0 {
		t.Errorf("ListManagedClusters(a user) = %s, %v; want none", resp.Body, err)
	}
	deleteDirect(t, name)
	s.g.Eventually(func() int { return len(s.inventory(name)) }).WithTimeout(30*time.Second).Should(gomega.Equal(0), "tombstoned %s", name)
}

// TestAgentRestartConverges: with the agent down, a registration waits as
// published; the restarted agent applies it, and a cluster deleted on the
// hub meanwhile leaves the inventory through the restart's full resync.
func TestAgentRestartConverges(t *testing.T) {
	s := newStack(t, "hub-e2e-restart")
	gone := "gone-" + s.hubID[len(s.hubID)-6:]
	createDirect(t, gone)
	s.g.Eventually(func() int { return len(s.inventory(gone)) }).WithTimeout(30 * time.Second).Should(gomega.Equal(1))

	s.agent.stop()
	deleteDirect(t, gone)
	c := s.register("while-down")
	if got, _ := s.cluster(c.Id); got.Phase == public.Ready {
		t.Fatalf("cluster ready with no agent running")
	}
	s.agent = startAgent(t, s.fm, s.hub, s.hubID, s.creds)
	s.waitOnHub(managedClusterName(c), true)
	s.waitPhase(c.Id, public.Ready)
	s.g.Eventually(func() int { return len(s.inventory(gone)) }).WithTimeout(30*time.Second).Should(gomega.Equal(0),
		"the cluster deleted while the agent was down is tombstoned by the restart's resync")
}

// TestFleetManagerRestart: the fleet manager restarts; the agent reconnects
// by itself and the next registration is delivered.
func TestFleetManagerRestart(t *testing.T) {
	s := newStack(t, "hub-e2e-fmrestart")
	first := s.register("before")
	s.waitPhase(first.Id, public.Ready)
	s.fm.stop()
	s.fm.start()
	second := s.register("after")
	s.waitOnHub(managedClusterName(second), true)
	s.waitPhase(second.Id, public.Ready)
	if got, _ := s.cluster(first.Id); got.Phase != public.Ready {
		t.Errorf("the first cluster after the restart = %s, want still ready", got.Phase)
	}
}

// TestSilentHubTurnsUnavailableAndBack: an agent that stops reporting makes
// its hub unready and its inventory stale (kept, not deleted); back, the hub
// is ready again and the inventory fresh after the full resync.
func TestSilentHubTurnsUnavailableAndBack(t *testing.T) {
	s := newStack(t, "hub-e2e-silent")
	name := "quiet-" + s.hubID[len(s.hubID)-6:]
	createDirect(t, name)
	s.g.Eventually(func() int { return len(s.inventory(name)) }).WithTimeout(30 * time.Second).Should(gomega.Equal(1))

	s.agent.stop()
	s.waitHubReady(fleet.ConditionFalse)
	s.g.Eventually(func() bool {
		rows := s.inventory(name)
		return len(rows) == 1 && rows[0].Stale
	}).WithTimeout(30*time.Second).Should(gomega.BeTrue(), "inventory of a silent hub marked stale, not deleted")
	if h := s.hubStatus(); h.InventoryStale == nil || !*h.InventoryStale || h.ResyncRequested == nil || !*h.ResyncRequested {
		t.Errorf("silent hub in the admin API: inventory_stale %v, resync_requested %v; want both true", h.InventoryStale, h.ResyncRequested)
	}
	c := s.register("during-silence")
	s.g.Eventually(func() string {
		got, _ := s.cluster(c.Id)
		for _, cond := range got.Conditions {
			if cond.Type == fleet.ConditionPlaced {
				return cond.Reason
			}
		}
		return ""
	}).WithTimeout(30*time.Second).Should(gomega.Equal(fleet.ReasonNoHubAvailable), "no placement on a silent hub")

	s.agent = startAgent(t, s.fm, s.hub, s.hubID, s.creds)
	s.waitHubReady(fleet.ConditionTrue)
	s.g.Eventually(func() bool {
		rows := s.inventory(name)
		return len(rows) == 1 && !rows[0].Stale
	}).WithTimeout(30*time.Second).Should(gomega.BeTrue(), "inventory fresh again after the agent's resync")
	if h := s.hubStatus(); h.InventoryStale == nil || *h.InventoryStale || h.LastInventoryAt == nil {
		t.Errorf("hub back in the admin API: inventory_stale %v, last_inventory_at %v; want false and set", h.InventoryStale, h.LastInventoryAt)
	}
	s.waitPhase(c.Id, public.Ready)
}

// hubStatus reads the stack's hub through the admin API.
func (s *stack) hubStatus() admin.Hub {
	s.t.Helper()
	resp, err := s.fm.Admin.GetHubWithResponse(context.Background(), s.hubID, bearer(s.admin))
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("GetHub(%s) = %v, %v", s.hubID, resp.StatusCode(), err)
	}
	return *resp.JSON200
}
