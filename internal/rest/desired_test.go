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

// TestDesiredDeltaMakesTheWholeSet: an agent that holds the set of one
// revision and asks for the changes since it (`since`) gets a delta whose
// entries, merged into the set it holds, make the whole set of the delta's
// revision: new registrations, a changed one in its new version, and a
// deregistered one removed. A `since` past the hub's revision gets the whole
// set.
func TestDesiredDeltaMakesTheWholeSet(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newStackEnv(t, flavours()[0])
	ctx := context.Background()
	hub := e.createAgentHub(t, "hub-delta", "eu", 10)
	agent := agentAuth(e.agentToken(t, *hub.AgentIdentity))
	e.heartbeat(t, hub, 0)
	e.startReconcilers(t)
	tok := e.userToken(t, "org-delta", "ann")
	create := func(name string) public.Cluster {
		return e.createCluster(t, tok, public.ClusterCreate{Name: name, Product: public.OCP, Zone: ptr("eu")})
	}
	// fetch long-polls the desired set; inside Eventually it takes the
	// attempt's Gomega, so a poll that ends before the reconcilers publish
	// (304) is retried rather than failing the test.
	fetch := func(g gomega.Gomega, params private.GetHubDesiredParams) *private.DesiredSet {
		params.Wait = ptr("100ms")
		resp, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, &params, agent)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), "GetHubDesired(%+v) = %s", params, resp.Status())
		return resp.JSON200
	}
	kept, changed, gone := create("kept"), create("changed"), create("gone")
	var base *private.DesiredSet
	g.Eventually(func(g gomega.Gomega) []private.DesiredRegistration {
		base = fetch(g, private.GetHubDesiredParams{})
		if base.Revision == 0 { // placed, not published yet
			return nil
		}
		return base.Registrations
	}).WithTimeout(30 * time.Second).Should(gomega.HaveLen(3))
	g.Expect(base.BaseRevision).To(gomega.BeNil(), "without since, the whole set")

	added := create("added")
	labels := public.Labels{"env": "changed"}
	if resp, err := e.client.UpdateClusterWithResponse(ctx, changed.Id, nil, public.ClusterPatch{Labels: &labels}, bearer(tok)); err != nil || resp.JSON200 == nil {
		t.Fatalf("UpdateCluster() = %v", outcome(resp, err))
	}
	if resp, err := e.client.DeleteClusterWithResponse(ctx, gone.Id, bearer(tok)); err != nil || resp.StatusCode() != http.StatusAccepted {
		t.Fatalf("DeleteCluster() = %v", outcome(resp, err))
	}

	// Once the reconcilers published all three changes, the delta since
	// base, merged into base, is the whole set at the delta's revision.
	type entry struct {
		ID         string
		Generation int64
		Objects    int
	}
	entries := func(regs []private.DesiredRegistration) []entry {
		out := []entry{}
		for _, r := range regs {
			out = append(out, entry{r.RegistrationId, r.Generation, len(r.Objects)})
		}
		return out
	}
	want := []entry{{kept.Id, 1, 3}, {changed.Id, 2, 3}, {added.Id, 1, 3}}
	var delta *private.DesiredSet
	g.Eventually(func(g gomega.Gomega) []entry {
		delta = fetch(g, private.GetHubDesiredParams{After: &base.Revision, Since: &base.Revision})
		if delta.BaseRevision == nil || *delta.BaseRevision != base.Revision || delta.RemovedRegistrations == nil {
			return nil
		}
		merged := map[string]private.DesiredRegistration{}
		for _, r := range base.Registrations {
			merged[r.RegistrationId] = r
		}
		for _, id := range *delta.RemovedRegistrations {
			delete(merged, id)
		}
		for _, r := range delta.Registrations {
			merged[r.RegistrationId] = r
		}
		out := []entry{}
		for _, r := range []string{kept.Id, changed.Id, gone.Id, added.Id} {
			if m, ok := merged[r]; ok {
				out = append(out, entry{m.RegistrationId, m.Generation, len(m.Objects)})
			}
		}
		return out
	}).WithTimeout(30 * time.Second).Should(gomega.Equal(want))
	g.Expect(*delta.RemovedRegistrations).To(gomega.Equal([]string{gone.Id}))
	g.Expect(entries(delta.Registrations)).NotTo(gomega.ContainElement(entry{kept.Id, 1, 3}), "an unchanged entry is not sent again")
	// The whole set read after it holds the same entries. Its revision is
	// the delta's or later: a publication that changes no entry may move the
	// hub's revision in between (see below).
	whole := fetch(g, private.GetHubDesiredParams{})
	g.Expect(whole.Revision).To(gomega.BeNumerically(">=", delta.Revision))
	g.Expect(entries(whole.Registrations)).To(gomega.ConsistOf(want))

	// Far past: the hub's revision may still move without changing the set
	// (a publication that only moves it), so delta.Revision + 1 may be
	// reached by the time it is asked.
	past := delta.Revision + 1_000_000
	again := fetch(g, private.GetHubDesiredParams{Since: &past})
	g.Expect(again.BaseRevision).To(gomega.BeNil(), "a since past the hub's revision gets the whole set")
	g.Expect(entries(again.Registrations)).To(gomega.ConsistOf(want))
}
