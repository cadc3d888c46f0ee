package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestAgentStatus drives the private API: only a hub's own agent may report
// for it, and every other caller learns nothing of the hub.
func TestAgentStatus(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newStackEnv(t, f)
			hubA, hubB := e.createAgentHub(t, "agent-a", "eu", 2), e.createAgentHub(t, "agent-b", "eu", 2)

			ack := e.heartbeat(t, hubA, 0)
			if ack.Kind != private.HubStatusAckKindHubStatusAck || ack.HubId != hubA.Id || ack.Revision != 0 || ack.AppliedRevision != 0 {
				t.Errorf("PutHubStatus(agent-a, 0) = %+v, want hub %s at revision 0, applied 0", ack, hubA.Id)
			}
			seen := e.getHub(t, hubA.Id)
			if seen.LastHeartbeatAt == nil || deref(seen.AgentVersion) != "test" {
				t.Errorf("GetHub(agent-a) after a heartbeat = last_heartbeat_at %v, agent_version %q; want set, \"test\"", seen.LastHeartbeatAt, deref(seen.AgentVersion))
			}

			report := private.HubStatusReport{AgentVersion: "intruder", AgentStartGeneration: 1}
			refused := []struct {
				call, hubID, tok string
			}{
				{"another agent's token", hubA.Id, e.agentToken(t, "agent-b-agent")},
				{"another hub's id", hubB.Id, e.agentToken(t, "agent-a-agent")},
				{"an unbound agent", hubA.Id, e.agentToken(t, "nobody-agent")},
				{"a user token", hubA.Id, e.userToken(t, "org-1", "alice")},
				{"an admin token", hubA.Id, e.adminToken(t)},
				{"an unknown hub", "no-such-hub", e.agentToken(t, "agent-a-agent")},
			}
			for _, tc := range refused {
				resp, err := e.agent.PutHubStatusWithResponse(ctx, tc.hubID, report, agentAuth(tc.tok))
				if err != nil {
					t.Fatalf("PutHubStatus(%s): %v", tc.call, err)
				}
				wantError(t, "PutHubStatus("+tc.call+")", e.apiEnv, fromPrivate(resp.JSON404), resp.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
			}
			if got := e.getHub(t, hubB.Id); got.LastHeartbeatAt != nil || got.AgentVersion != nil {
				t.Errorf("GetHub(agent-b) after refused reports = %v %q; want no heartbeat recorded", got.LastHeartbeatAt, deref(got.AgentVersion))
			}
			if got := e.getHub(t, hubA.Id); deref(got.AgentVersion) != "test" {
				t.Errorf("GetHub(agent-a).agent_version after refused reports = %q, want \"test\"", deref(got.AgentVersion))
			}

			invalid := []struct{ call, body string }{
				{"no agent_version", `{"agent_start_generation":1,"applied_revision":0}`},
				{"negative revision", `{"agent_version":"v","agent_start_generation":1,"applied_revision":-1}`},
				{"unknown field", `{"agent_version":"v","agent_start_generation":1,"applied_revision":0,"mood":"good"}`},
			}
			for _, tc := range invalid {
				resp, err := e.agent.PutHubStatusWithBodyWithResponse(ctx, hubA.Id, "application/json", strings.NewReader(tc.body),
					agentAuth(e.agentToken(t, "agent-a-agent")))
				if err != nil {
					t.Fatalf("PutHubStatus(%s): %v", tc.call, err)
				}
				wantError(t, "PutHubStatus("+tc.call+")", e.apiEnv, fromPrivate(resp.JSON400), resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
			}

			if clamped := e.heartbeat(t, hubA, 99); clamped.AppliedRevision != clamped.Revision || clamped.Revision != 0 {
				t.Errorf("PutHubStatus(agent-a, 99) = revision %d, applied %d; want applied clamped to revision 0", clamped.Revision, clamped.AppliedRevision)
			}
			t.Run("ready_and_clamp", func(t *testing.T) { testAgentReadyAndClamp(t, e) })
		})
	}
}

// testAgentReadyAndClamp needs the reconcilers: a heartbeat turns the hub
// Ready, and an acknowledgement past the hub's revision is clamped to it.
func testAgentReadyAndClamp(t *testing.T, e *stackEnv) {
	e.startReconcilers(t)
	hub := e.createAgentHub(t, "ready-hub", "ready", 2)
	if c := hubCondition(e.getHub(t, hub.Id), fleet.ConditionHubReady); c.Status != admin.Unknown || c.Reason != fleet.ReasonAwaitingHeartbeat {
		t.Errorf("GetHub(ready-hub) before a heartbeat: Ready = %s (%s), want Unknown (%s)", c.Status, c.Reason, fleet.ReasonAwaitingHeartbeat)
	}
	e.heartbeat(t, hub, 0)
	gomega.NewWithT(t).Eventually(func() admin.Condition {
		return hubCondition(e.getHub(t, hub.Id), fleet.ConditionHubReady)
	}).WithTimeout(waitFor).WithPolling(25*time.Millisecond).Should(gomega.And(
		gomega.HaveField("Status", admin.True), gomega.HaveField("Reason", fleet.ReasonHeartbeatFresh)),
		"GetHub(ready-hub): Ready after a heartbeat")

	tok := e.userToken(t, "org-clamp", "alice")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "clamp", Zone: ptr("ready"), Product: public.OCP})
	e.eventuallyCluster(t, tok, c.Id, "published", func(c public.Cluster) bool {
		return hasCondition(c, fleet.ConditionDelivered, public.ConditionStatusFalse, fleet.ReasonPublished)
	})
	revision := e.getHub(t, hub.Id).Revision
	if revision < 1 {
		t.Fatalf("GetHub(ready-hub).revision = %d after a publication, want at least 1", revision)
	}
	ack := e.heartbeat(t, hub, revision+1000)
	if ack.Revision != revision || ack.AppliedRevision != revision {
		t.Errorf("PutHubStatus(ready-hub, %d) = revision %d, applied %d; want both %d", revision+1000, ack.Revision, ack.AppliedRevision, revision)
	}
	if older := e.heartbeat(t, hub, 0); older.AppliedRevision != revision {
		t.Errorf("PutHubStatus(ready-hub, 0) after applying %d = applied %d; want it never to go back", revision, older.AppliedRevision)
	}
	e.eventuallyCluster(t, tok, c.Id, "delivered", func(c public.Cluster) bool {
		return hasCondition(c, fleet.ConditionDelivered, public.ConditionStatusTrue, fleet.ReasonAcknowledged)
	})
}

// hubCondition returns the condition of type typ of h, or a zero one.
func hubCondition(h admin.Hub, typ string) admin.Condition {
	for _, c := range h.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return admin.Condition{}
}
