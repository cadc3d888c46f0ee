package rest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func TestResourceChangeFeed(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			hub, other := e.createAgentHub(t, "rfeed-a", "eu", 5), e.createAgentHub(t, "rfeed-b", "eu", 5)
			t.Run("order, resume and scope", func(t *testing.T) { testResourceFeedOrderAndScope(t, e, hub, other) })
			t.Run("long-poll", func(t *testing.T) { testResourceFeedLongPoll(t, e, hub) })
			t.Run("errors", func(t *testing.T) { testResourceFeedErrors(t, e, hub) })
		})
	}
}

// ingestPolicies plays hub's agent: one batch of Policy upserts (in
// namespace ns) and deletes (by key).
func ingestPolicies(t *testing.T, e *stackEnv, hub admin.Hub, upserts []string, deletes []string) {
	t.Helper()
	batch := policyBatch(1, false, false)
	batch.Deletes = append(batch.Deletes, deletes...)
	for _, n := range upserts {
		obj := policyReport("ns", n)
		obj.Body["spec"] = map[string]any{"remediationAction": time.Now().String()}
		batch.Upserts = append(batch.Upserts, obj)
	}
	resp, err := e.agent.PostHubResourcesWithResponse(context.Background(), hub.Id, batch, agentAuth(e.agentToken(t, deref(hub.AgentIdentity))))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("PostHubResources(%v, deletes %v) = %s; want 200", upserts, deletes, outcome(resp, err))
	}
}

func resourceFeedNames(l *admin.ResourceChangeList) []string {
	out := []string{}
	for _, c := range l.Items {
		name := c.Resource.Namespace + "/" + c.Resource.Name
		if c.DeletedAt != nil {
			name += " (deleted)"
		}
		out = append(out, name)
	}
	return out
}

// resourceFeedEventually reads the feed of params after cursor until it
// returns want.
func resourceFeedEventually(t *testing.T, e *stackEnv, params admin.ListResourceChangesParams, after string, want ...string) *admin.ResourceChangeList {
	t.Helper()
	var page *admin.ResourceChangeList
	params.After = &after
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		resp, err := e.admin.ListResourceChangesWithResponse(context.Background(), &params, adminAuth(e.viewerToken(t)))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), "ListResourceChanges(after %q) = %s", after, outcome(resp, err))
		page = resp.JSON200
		g.Expect(resourceFeedNames(page)).To(gomega.Equal(append([]string{}, want...)))
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.Succeed())
	return page
}

// resourceListCursor is the cursor GET /admin/resources returns.
func resourceListCursor(t *testing.T, e *stackEnv, kind string) string {
	t.Helper()
	resp, err := e.admin.ListResourcesWithResponse(context.Background(), &admin.ListResourcesParams{Kind: kind}, adminAuth(e.viewerToken(t)))
	if err != nil || resp.JSON200 == nil || resp.JSON200.Cursor == nil || *resp.JSON200.Cursor == "" {
		t.Fatalf("ListResources(%s) = %s; want 200 with a cursor", kind, outcome(resp, err))
	}
	return *resp.JSON200.Cursor
}

func testResourceFeedOrderAndScope(t *testing.T, e *stackEnv, hub, other admin.Hub) {
	policies := admin.ListResourceChangesParams{Kind: "policies"}
	start := resourceListCursor(t, e, "Policy")
	ingestPolicies(t, e, hub, []string{"p-b", "p-a"}, nil)
	ingestPolicies(t, e, hub, []string{"p-c"}, nil)
	page := resourceFeedEventually(t, e, policies, start, "ns/p-b", "ns/p-a", "ns/p-c")
	ingestPolicies(t, e, hub, []string{"p-b"}, []string{"ns/p-a"})
	next := resourceFeedEventually(t, e, policies, page.Cursor, "ns/p-b", "ns/p-a (deleted)")
	resourceFeedEventually(t, e, policies, next.Cursor)

	// Pages of one: each resumes after the last.
	small := policies
	small.Size = ptr(1)
	one := resourceFeedEventually(t, e, small, start, "ns/p-c")
	resourceFeedEventually(t, e, small, one.Cursor, "ns/p-b")

	// Another hub's objects, scoped out by hub_id; another kind's, by kind.
	after := resourceListCursor(t, e, "Policy")
	ingestPolicies(t, e, other, []string{"p-other"}, nil)
	placement := private.ResourceBatch{Group: "cluster.open-cluster-management.io", Kind: "Placement", Deletes: []string{},
		Upserts: []private.ResourceObject{{Namespace: ptr("ns"), Name: "place", Body: map[string]any{"kind": "Placement"}}}}
	resp, err := e.agent.PostHubResourcesWithResponse(context.Background(), hub.Id, placement, agentAuth(e.agentToken(t, deref(hub.AgentIdentity))))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("PostHubResources(Placement) = %s; want 200", outcome(resp, err))
	}
	resourceFeedEventually(t, e, policies, after, "ns/p-other")
	resourceFeedEventually(t, e, admin.ListResourceChangesParams{Kind: "policies", HubId: &hub.Id}, after)
	resourceFeedEventually(t, e, admin.ListResourceChangesParams{Kind: "Placement"}, after, "ns/place")
}

func testResourceFeedLongPoll(t *testing.T, e *stackEnv, hub admin.Hub) {
	g := gomega.NewWithT(t)
	viewer := adminAuth(e.viewerToken(t))
	quiet := resourceFeedEventually(t, e, admin.ListResourceChangesParams{Kind: "Policy"}, resourceListCursor(t, e, "Policy"))
	type result struct {
		resp *admin.ListResourceChangesResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e.admin.ListResourceChangesWithResponse(context.Background(),
			&admin.ListResourceChangesParams{Kind: "Policy", After: &quiet.Cursor, Wait: ptr("50s")}, viewer)
		done <- result{resp, err}
	}()
	g.Consistently(done).WithTimeout(300*time.Millisecond).ShouldNot(gomega.Receive(), "the long-poll answered with nothing new")
	ingestPolicies(t, e, hub, []string{"p-woken"}, nil)
	var got result
	g.Eventually(done).WithTimeout(10*time.Second).Should(gomega.Receive(&got), "the long-poll was not woken by the ingest")
	g.Expect(got.err).NotTo(gomega.HaveOccurred())
	g.Expect(got.resp.JSON200).NotTo(gomega.BeNil(), "ListResourceChanges(wait) = %s", outcome(got.resp, got.err))
	g.Expect(resourceFeedNames(got.resp.JSON200)).To(gomega.Equal([]string{"ns/p-woken"}))

	// Nothing new within the wait: 200, no items, a cursor to keep.
	began := time.Now()
	resp, err := e.admin.ListResourceChangesWithResponse(context.Background(),
		&admin.ListResourceChangesParams{Kind: "Policy", After: &got.resp.JSON200.Cursor, Wait: ptr("400ms")}, viewer)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(resp.JSON200).NotTo(gomega.BeNil(), "ListResourceChanges(wait 400ms) = %s", outcome(resp, err))
	g.Expect(resp.JSON200.Items).To(gomega.BeEmpty())
	g.Expect(resp.JSON200.Cursor).NotTo(gomega.BeEmpty())
	g.Expect(time.Since(began)).To(gomega.BeNumerically(">=", 400*time.Millisecond), "answered before the wait ended")
}

func testResourceFeedErrors(t *testing.T, e *stackEnv, hub admin.Hub) {
	ctx := context.Background()
	viewer := adminAuth(e.viewerToken(t))
	for _, p := range []admin.ListResourceChangesParams{{Kind: "Policy", After: ptr("garbage!")}, {Kind: "Policy", Wait: ptr("soon")},
		{Kind: "secrets"}, {Kind: "ManagedCluster"}} {
		resp, err := e.admin.ListResourceChangesWithResponse(ctx, &p, viewer)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, "ListResourceChanges(bad)", e.apiEnv, fromAdmin(resp.JSON400), resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	}
	user, err := e.admin.ListResourceChangesWithResponse(ctx, &admin.ListResourceChangesParams{Kind: "Policy"},
		adminAuth(e.userToken(t, "org-1", "alice")))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "ListResourceChanges(a user)", e.apiEnv, fromAdmin(user.JSON403), user.StatusCode(), http.StatusForbidden, fleet.CodeAdminRoleRequired)

	old := resourceListCursor(t, e, "Policy")
	ingestPolicies(t, e, hub, []string{"p-doomed"}, nil)
	ingestPolicies(t, e, hub, nil, []string{"ns/p-doomed"})
	db := pgtest.Open(t, e.dbCfg)
	if err := db.Gorm.Exec(`UPDATE resources SET deleted_at = now() - interval '30 days' WHERE name = 'p-doomed'`).Error; err != nil {
		t.Fatal(err)
	}
	// The purge takes a tombstone once every older transaction has ended.
	gomega.NewWithT(t).Eventually(func() (int, error) {
		return e.store.PurgeTombstones(ctx, "resources", time.Now().Add(-7*24*time.Hour), 1000)
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(1), "PurgeTombstones(resources)")
	resp, err := e.admin.ListResourceChangesWithResponse(ctx, &admin.ListResourceChangesParams{Kind: "Policy", After: &old}, viewer)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "ListResourceChanges(expired cursor)", e.apiEnv, fromAdmin(resp.JSON410), resp.StatusCode(), http.StatusGone, fleet.CodeCursorExpired)
	// The way back: list again, resume from the list's cursor.
	relisted := resourceListCursor(t, e, "Policy")
	resourceFeedEventually(t, e, admin.ListResourceChangesParams{Kind: "Policy"}, relisted)
	ingestPolicies(t, e, hub, []string{"p-after"}, nil)
	resourceFeedEventually(t, e, admin.ListResourceChangesParams{Kind: "Policy"}, relisted, "ns/p-after")
}
