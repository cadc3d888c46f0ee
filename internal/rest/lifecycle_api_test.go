package rest_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestLifecycleAPI follows a registration from create to gone through the
// three APIs and the reconcilers, as an SRE, a user and a hub agent see it.
func TestLifecycleAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			e.startReconcilers(t)
			t.Run("register_deliver_deregister", func(t *testing.T) { testLifecycle(t, e) })
			t.Run("waits_for_a_hub_in_its_zone", func(t *testing.T) { testLifecycleNoHub(t, e) })
		})
	}
}

func testLifecycle(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	hub := e.createAgentHub(t, "life-eu", "eu", 5)
	e.heartbeat(t, hub, 0)
	tok := e.userToken(t, "org-life", "alice")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "life", Zone: ptr("eu"), Region: ptr("eu-1"), Product: public.OCP,
		Labels: &public.Labels{"env": "prod"}})
	if c.Phase != public.Accepted {
		t.Errorf("CreateCluster(life).phase = %s, want accepted", c.Phase)
	}

	c = e.eventuallyCluster(t, tok, c.Id, "published to its hub's agent", func(c public.Cluster) bool {
		return c.Phase == public.Provisioning && hasCondition(c, fleet.ConditionPlaced, public.ConditionStatusTrue, fleet.ReasonHubSelected) &&
			hasCondition(c, fleet.ConditionDelivered, public.ConditionStatusFalse, fleet.ReasonPublished)
	})
	if c.Hub == nil || c.Hub.Id != hub.Id || c.Hub.Name != "life-eu" || c.Hub.Zone != "eu" || c.Hub.Region != "eu-1" {
		t.Errorf("GetCluster(life).hub = %+v, want life-eu in zone eu, region eu-1", c.Hub)
	}
	if c.ObservedGeneration != c.Generation {
		t.Errorf("GetCluster(life): observed generation %d, want %d", c.ObservedGeneration, c.Generation)
	}
	placed := e.getHub(t, hub.Id)
	if placed.PlacedCount != 1 || placed.Revision < 1 || placed.AppliedRevision != 0 {
		t.Errorf("GetHub(life-eu) = placed %d, revision %d, applied %d; want 1, at least 1, 0", placed.PlacedCount, placed.Revision, placed.AppliedRevision)
	}

	if ack := e.heartbeat(t, hub, placed.Revision); ack.AppliedRevision != placed.Revision {
		t.Errorf("PutHubStatus(life-eu, %d).applied_revision = %d, want %d", placed.Revision, ack.AppliedRevision, placed.Revision)
	}
	c = e.eventuallyCluster(t, tok, c.Id, "delivered", func(c public.Cluster) bool {
		return hasCondition(c, fleet.ConditionDelivered, public.ConditionStatusTrue, fleet.ReasonAcknowledged)
	})
	for _, typ := range []string{fleet.ConditionJoined, fleet.ConditionAvailable} {
		if cond, _ := clusterCondition(c, typ); cond.Status != public.ConditionStatusUnknown || c.Phase != public.Provisioning {
			t.Errorf("GetCluster(life) delivered: %s = %s, phase %s; want Unknown until the hub reports, provisioning", typ, cond.Status, c.Phase)
		}
	}

	del, err := e.client.DeleteClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil || del.JSON202 == nil {
		t.Fatalf("DeleteCluster(life) = %s; want 202", outcome(del, err))
	}
	e.eventuallyCluster(t, tok, c.Id, "withdrawn from its hub", func(c public.Cluster) bool {
		return c.Phase == public.Deleting && hasCondition(c, fleet.ConditionDelivered, public.ConditionStatusFalse, fleet.ReasonWithdrawing)
	})
	withdrawn := e.getHub(t, hub.Id)
	if withdrawn.Revision <= placed.Revision || withdrawn.PlacedCount != 1 {
		t.Errorf("GetHub(life-eu) while withdrawing = revision %d, placed %d; want past %d, still 1", withdrawn.Revision, withdrawn.PlacedCount, placed.Revision)
	}
	e.ackAll(t, hub)
	e.eventuallyGone(t, tok, c.Id)
	if got := e.getHub(t, hub.Id); got.PlacedCount != 0 {
		t.Errorf("GetHub(life-eu).placed_count after deregistration = %d, want 0", got.PlacedCount)
	}
	if n := clusterTotal(t, e, tok, ""); n != 0 {
		t.Errorf("ListClusters() after deregistration: total = %d, want 0", n)
	}
}

func testLifecycleNoHub(t *testing.T, e *stackEnv) {
	euHub := e.createAgentHub(t, "waiting-eu", "eu", 5)
	e.heartbeat(t, euHub, 0)
	tok := e.userToken(t, "org-wait", "bob")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "far-away", Zone: ptr("apac"), Product: public.OCP})
	neverOnEU := func(c public.Cluster) {
		if c.Hub != nil && c.Hub.Zone != "apac" {
			t.Errorf("GetCluster(far-away) placed on %s in zone %s; it must never leave zone apac", c.Hub.Name, c.Hub.Zone)
		}
	}
	c = e.eventuallyCluster(t, tok, c.Id, "left unplaced", func(c public.Cluster) bool {
		neverOnEU(c)
		return hasCondition(c, fleet.ConditionPlaced, public.ConditionStatusFalse, fleet.ReasonNoHubAvailable)
	})
	if c.Phase != public.Accepted || c.Hub != nil {
		t.Errorf("GetCluster(far-away) without a hub in its zone = %s, want accepted and unplaced", describeCluster(c))
	}
	// The eu hub keeps reporting and has room: still the registration stays put.
	e.heartbeat(t, euHub, 0)
	gomega.NewWithT(t).Consistently(func() *public.HubRef {
		resp, err := e.client.GetClusterWithResponse(context.Background(), c.Id, bearer(tok))
		if err != nil || resp.JSON200 == nil {
			return &public.HubRef{Name: "unreadable"}
		}
		return resp.JSON200.Hub
	}).WithTimeout(300*time.Millisecond).WithPolling(25*time.Millisecond).Should(gomega.BeNil(), "GetCluster(far-away).hub with no hub in apac")

	apac := e.createAgentHub(t, "waiting-apac", "apac", 1)
	c = e.eventuallyCluster(t, tok, c.Id, "still unplaced before the apac agent reports", func(c public.Cluster) bool {
		neverOnEU(c)
		return true
	})
	if c.Hub != nil {
		t.Errorf("GetCluster(far-away) placed on %s before its agent reported", c.Hub.Name)
	}
	e.heartbeat(t, apac, 0)
	c = e.eventuallyCluster(t, tok, c.Id, "placed on the apac hub", func(c public.Cluster) bool {
		neverOnEU(c)
		return c.Hub != nil && hasCondition(c, fleet.ConditionPlaced, public.ConditionStatusTrue, fleet.ReasonHubSelected)
	})
	if c.Hub.Id != apac.Id || c.Hub.Zone != "apac" {
		t.Errorf("GetCluster(far-away).hub = %+v, want waiting-apac", c.Hub)
	}
	if got := e.getHub(t, euHub.Id); got.PlacedCount != 0 {
		t.Errorf("GetHub(waiting-eu).placed_count = %d, want 0", got.PlacedCount)
	}
}
