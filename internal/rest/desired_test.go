package rest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestDesiredLongPoll: the agent's long-poll answers at once when it is
// behind, with 304 when nothing moves within its wait, and as soon as a
// registration is published while it waits.
func TestDesiredLongPoll(t *testing.T) {
	t.Parallel()
	e := newStackEnv(t, flavours()[0])
	ctx := context.Background()
	hub := e.createAgentHub(t, "hub-lp", "eu", 10)
	agent := agentAuth(e.agentToken(t, *hub.AgentIdentity))
	e.heartbeat(t, hub, 0)

	resp, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{After: ptr(int64(0)), Wait: ptr("200ms")}, agent)
	if err != nil || resp.StatusCode() != http.StatusNotModified {
		t.Fatalf("GetHubDesired(after 0, revision 0) = %v, %v; want 304 after the wait", outcome(resp, err), err)
	}
	other, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, nil, agentAuth(e.agentToken(t, "someone-else")))
	if err != nil || other.StatusCode() != http.StatusNotFound {
		t.Errorf("GetHubDesired(another agent) = %v; want 404", outcome(other, err))
	}

	e.startReconcilers(t)
	type answer struct {
		resp  *private.GetHubDesiredResponse
		err   error
		after time.Duration
	}
	answered := make(chan answer, 1)
	start := time.Now()
	go func() {
		r, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{After: ptr(int64(0)), Wait: ptr("20s")}, agent)
		answered <- answer{r, err, time.Since(start)}
	}()
	tok := e.userToken(t, "org-lp", "ann")
	created := e.createCluster(t, tok, public.ClusterCreate{Name: "polled", Product: public.OCP, Zone: ptr("eu"),
		Credentials: &public.ImportCredentials{ApiUrl: ptr("https://api.polled.example.com:6443"), Token: ptr("sha256~token")}})
	got := <-answered
	if got.err != nil || got.resp.JSON200 == nil {
		t.Fatalf("GetHubDesired(waiting) = %v", outcome(got.resp, got.err))
	}
	if got.after > 15*time.Second {
		t.Errorf("the long-poll answered after %s, not when the registration was published", got.after)
	}
	set := got.resp.JSON200
	if set.Revision < 1 || len(set.Registrations) != 1 || set.Registrations[0].RegistrationId != created.Id {
		t.Fatalf("desired set = %+v, want revision >= 1 with the new registration", set)
	}
	kinds := []string{}
	for _, o := range kubeObjects(t, set.Registrations[0].Objects) {
		kinds = append(kinds, o.Kind)
	}
	if len(kinds) != 4 || kinds[0] != "Namespace" || kinds[1] != "ManagedCluster" || kinds[2] != "KlusterletAddonConfig" || kinds[3] != "Secret" {
		t.Errorf("objects = %v, want Namespace, ManagedCluster, KlusterletAddonConfig, Secret", kinds)
	}
	// Up to date: the next poll waits again.
	again, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{After: &set.Revision, Wait: ptr("100ms")}, agent)
	if err != nil || again.StatusCode() != http.StatusNotModified {
		t.Errorf("GetHubDesired(after the current revision) = %v; want 304", outcome(again, err))
	}
}

// TestDesiredWithoutAfterAndOnDrain: an agent with nothing yet gets the set at
// once, and a waiting long-poll answers as soon as the server drains.
func TestDesiredWithoutAfterAndOnDrain(t *testing.T) {
	t.Parallel()
	e := newStackEnv(t, flavours()[0])
	ctx := context.Background()
	hub := e.createAgentHub(t, "hub-drain", "eu", 10)
	agent := agentAuth(e.agentToken(t, *hub.AgentIdentity))
	first, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{Wait: ptr("20s")}, agent)
	if err != nil || first.JSON200 == nil || first.JSON200.Revision != 0 || len(first.JSON200.Registrations) != 0 {
		t.Fatalf("GetHubDesired(no after) = %v; want the empty set at once", outcome(first, err))
	}
	answered := make(chan int, 1)
	start := time.Now()
	go func() {
		r, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &private.GetHubDesiredParams{After: ptr(int64(0)), Wait: ptr("30s")}, agent)
		if err != nil {
			answered <- 0
			return
		}
		answered <- r.StatusCode()
	}()
	// Let the poll reach its wait, then drain.
	gomega.NewWithT(t).Eventually(func() bool { return time.Since(start) > 300*time.Millisecond }).Should(gomega.BeTrue())
	e.api.Drain()
	if got := <-answered; got != http.StatusNotModified || time.Since(start) > 10*time.Second {
		t.Errorf("a waiting long-poll on drain = %d after %s; want 304 at once", got, time.Since(start))
	}
}
