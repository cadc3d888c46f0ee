package onpostgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestNoHubAvailableUntilAHubAppears(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startReplica(replicaOptions{})
	e.hub("hub-eu", "eu", "eu-west-1", 5)
	reg := e.register("waits", "ap", "")
	e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionFalse, fleet.ReasonNoHubAvailable), "NoHubAvailable")

	// A cordoned hub in the zone is no help; uncordoning it is.
	ap := e.hub("hub-ap", "ap", "ap-south-1", 5)
	if _, err := e.store.SetHubCordoned(context.Background(), ap.ID, true); err != nil {
		t.Fatal(err)
	}
	reg, _ = e.find(reg.ID)
	if reg.Hub != nil {
		t.Fatalf("registration placed on a cordoned hub: %+v", reg.Hub)
	}
	if _, err := e.store.SetHubCordoned(context.Background(), ap.ID, false); err != nil {
		t.Fatal(err)
	}
	reg = e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionTrue, fleet.ReasonHubSelected), "placed")
	if reg.Hub.ID != ap.ID {
		t.Errorf("placed on %s, want %s, the only hub of zone ap", reg.Hub.Name, ap.Name)
	}
}

func TestPlacementPrefersRegionAndLeastLoaded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	far := e.hub("hub-far", "eu", "eu-central-1", 100)
	nearA := e.hub("hub-near-a", "eu", "eu-west-1", 100)
	nearB := e.hub("hub-near-b", "eu", "eu-west-1", 100)
	other := e.hub("hub-us", "us", "eu-west-1", 100) // same region name, other zone: never used
	var ids []string
	for i := range 10 {
		ids = append(ids, e.register(fmt.Sprintf("near-%d", i), "eu", "eu-west-1").ID)
	}
	e.startReplica(replicaOptions{})
	counts := map[string]int{}
	for _, id := range ids {
		r := e.eventually(id, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionTrue, ""), "placed")
		counts[r.Hub.ID]++
	}
	if counts[far.ID] != 0 || counts[other.ID] != 0 || counts[nearA.ID] != 5 || counts[nearB.ID] != 5 {
		t.Errorf("placements = far %d, us %d, near-a %d, near-b %d; want 0, 0, 5, 5",
			counts[far.ID], counts[other.ID], counts[nearA.ID], counts[nearB.ID])
	}
	// With no room left in the region, the zone's other region is used.
	if _, err := e.store.SetHubCordoned(context.Background(), nearA.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetHubCordoned(context.Background(), nearB.ID, true); err != nil {
		t.Fatal(err)
	}
	r := e.register("spill", "eu", "eu-west-1")
	r = e.eventually(r.ID, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionTrue, ""), "placed")
	if r.Hub.ID != far.ID {
		t.Errorf("spill placed on %s, want %s (same zone, other region)", r.Hub.Name, far.Name)
	}
}

func TestSilentHubTakesNoPlacements(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Long enough that a loaded machine still places within it after the
	// heartbeat; short enough to wait for.
	e.scfg.HeartbeatTimeout = 3 * time.Second
	e.startReplica(replicaOptions{})
	hub := e.hub("hub-quiet", "eu", "eu-west-1", 5)
	gomega.NewWithT(t).Eventually(func() fleet.ConditionStatus {
		h, _ := e.store.FindHub(context.Background(), hub.ID)
		return h.Conditions.Status(fleet.ConditionHubReady)
	}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(gomega.Equal(fleet.ConditionFalse), "hub never turned unready")
	reg := e.register("late", "eu", "")
	e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionFalse, fleet.ReasonNoHubAvailable), "NoHubAvailable")
	e.heartbeat(hub, 0)
	e.eventually(reg.ID, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionTrue, ""), "placed after the hub came back")
	gomega.NewWithT(t).Eventually(func() string {
		h, _ := e.store.FindHub(context.Background(), hub.ID)
		return h.Conditions.Reason(fleet.ConditionHubReady)
	}).WithTimeout(5 * time.Second).Should(gomega.Equal(fleet.ReasonHeartbeatFresh))
}

// TestCustomerHubTakesOnlyItsOrg: a hub with an owner org takes only that
// org's registrations, and that org's registrations go there first.
func TestCustomerHubTakesOnlyItsOrg(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	shared := e.hub("hub-shared", "eu", "eu-west-1", 10)
	owned, err := e.store.CreateHub(context.Background(), fleet.HubCreate{Name: "hub-owned", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "hub-owned-agent", OwnerOrgID: caller.OrgID})
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(owned, 0)
	e.startReplica(replicaOptions{})
	mine := e.register("mine", "eu", "eu-west-1")
	other, _, err := e.store.CreateRegistration(context.Background(), fleet.Identity{OrgID: "org-other", Username: "bob"},
		fleet.RegistrationCreate{Name: "theirs", Zone: "eu", Region: "eu-west-1", Product: fleet.ProductOCP}, "")
	if err != nil {
		t.Fatal(err)
	}
	if r := e.eventually(mine.ID, 5*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionTrue, ""), "placed"); r.Hub.ID != owned.ID {
		t.Errorf("the owner org's registration went to %s, want its own hub %s", r.Hub.Name, owned.Name)
	}
	gomega.NewWithT(t).Eventually(func() string {
		r, _ := e.store.FindRegistration(context.Background(), "org-other", other.ID)
		if r.Hub == nil {
			return ""
		}
		return r.Hub.ID
	}).WithTimeout(5*time.Second).Should(gomega.Equal(shared.ID), "another org's registration must land on the shared hub")
}

// TestNoPlacementOnAHubWhoseAgentIsNotReady has a hub's agent report in time
// but say it cannot reach its hub's API server (HubAgentReady False): the
// hub is not Ready and takes no placement, where its fresh heartbeat alone
// made it Ready; once its agent is ready again, the waiting registration is
// placed there.
func TestNoPlacementOnAHubWhoseAgentIsNotReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startReplica(replicaOptions{})
	h := e.hub("hub-broken", "eu", "eu-west-1", 5)
	report := func(status fleet.ConditionStatus, reason string) {
		t.Helper()
		_, err := e.store.RecordHubHeartbeat(context.Background(), h.ID, h.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test",
			Conditions: fleet.Conditions{{Type: fleet.ConditionHubAgentReady, Status: status, Reason: reason, LastTransitionTime: time.Now()}}})
		if err != nil {
			t.Fatalf("RecordHubHeartbeat(%s): %v", reason, err)
		}
	}
	report(fleet.ConditionFalse, "HubUnreachable")
	g := gomega.NewWithT(t)
	g.Eventually(func() string {
		got, _ := e.store.FindHub(context.Background(), h.ID)
		c, _ := got.Conditions.Get(fleet.ConditionHubReady)
		return string(c.Status) + " " + c.Reason
	}).WithTimeout(10*time.Second).Should(gomega.Equal("False "+fleet.ReasonAgentNotReady), "the hub's Ready condition")
	reg := e.register("waits", "eu", "eu-west-1")
	e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionFalse, fleet.ReasonNoHubAvailable), "NoHubAvailable")

	report(fleet.ConditionTrue, "AgentReady")
	reg = e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionTrue, fleet.ReasonHubSelected), "placed")
	if reg.Hub == nil || reg.Hub.ID != h.ID {
		t.Errorf("placed on %+v, want %s", reg.Hub, h.Name)
	}
}
