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
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

func TestManagedClusterChangeFeed(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			hub := e.createAgentHub(t, "feed-hub", "eu", 5)
			t.Run("order, resume and scope", func(t *testing.T) { testFeedOrderAndResume(t, e, hub) })
			t.Run("long-poll", func(t *testing.T) { testFeedLongPoll(t, e, hub) })
			t.Run("errors", func(t *testing.T) { testFeedErrors(t, e, hub) })
		})
	}
}

// ingestFeed plays hub's agent: one batch of upserts and deletes.
func ingestFeed(t *testing.T, e *stackEnv, hub admin.Hub, upserts []string, deletes []string) {
	t.Helper()
	batch := private.InventoryBatch{Generation: 1, Deletes: append([]string{}, deletes...), Upserts: []private.ManagedClusterSummary{}}
	for _, n := range upserts {
		batch.Upserts = append(batch.Upserts, private.ManagedClusterSummary{Name: n, Labels: &map[string]string{"gen": time.Now().String()}})
	}
	resp, err := e.agent.PostHubInventoryWithResponse(context.Background(), hub.Id, batch, agentAuth(e.agentToken(t, deref(hub.AgentIdentity))))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("PostHubInventory(%v, deletes %v) = %s; want 200", upserts, deletes, outcome(resp, err))
	}
}

func feedNames(l *public.ManagedClusterChangeList) []string {
	out := []string{}
	for _, c := range l.Items {
		name := c.Cluster.Name
		if c.DeletedAt != nil {
			name += " (deleted)"
		}
		out = append(out, name)
	}
	return out
}

// feedEventually reads the feed after cursor until it returns want.
func feedEventually(t *testing.T, e *stackEnv, tok, after string, want ...string) *public.ManagedClusterChangeList {
	t.Helper()
	var page *public.ManagedClusterChangeList
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		resp, err := e.client.ListManagedClusterChangesWithResponse(context.Background(),
			&public.ListManagedClusterChangesParams{After: &after}, bearer(tok))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), "ListManagedClusterChanges(after %q) = %s", after, outcome(resp, err))
		page = resp.JSON200
		g.Expect(feedNames(page)).To(gomega.Equal(append([]string{}, want...)))
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.Succeed())
	return page
}

// listCursor is the cursor GET /managed_clusters returns.
func listCursor(t *testing.T, e *stackEnv, tok string) string {
	t.Helper()
	resp, err := e.client.ListManagedClustersWithResponse(context.Background(), &public.ListManagedClustersParams{}, bearer(tok))
	if err != nil || resp.JSON200 == nil || resp.JSON200.Cursor == nil || *resp.JSON200.Cursor == "" {
		t.Fatalf("ListManagedClusters() = %s; want 200 with a cursor", outcome(resp, err))
	}
	return *resp.JSON200.Cursor
}

func testFeedOrderAndResume(t *testing.T, e *stackEnv, hub admin.Hub) {
	viewer, stranger := e.viewerToken(t), e.userToken(t, "org-feed", "someone")
	start := listCursor(t, e, viewer)
	ingestFeed(t, e, hub, []string{"mc-b", "mc-a"}, nil)
	ingestFeed(t, e, hub, []string{"mc-c"}, nil)
	page := feedEventually(t, e, viewer, start, "mc-b", "mc-a", "mc-c")
	ingestFeed(t, e, hub, []string{"mc-b"}, []string{"mc-a"})
	next := feedEventually(t, e, viewer, page.Cursor, "mc-b", "mc-a (deleted)")
	feedEventually(t, e, viewer, next.Cursor)
	// A list then the feed from the list's cursor: nothing twice that the
	// list already showed is required, nothing after it is lost.
	after := listCursor(t, e, viewer)
	ingestFeed(t, e, hub, []string{"mc-d"}, nil)
	feedEventually(t, e, viewer, after, "mc-d")
	// The hub is shared and the clusters have no registration: another
	// org's user sees none of it.
	feedEventually(t, e, stranger, start)
}

func testFeedLongPoll(t *testing.T, e *stackEnv, hub admin.Hub) {
	g := gomega.NewWithT(t)
	viewer := e.viewerToken(t)
	cursor := listCursor(t, e, viewer)
	quiet := feedEventually(t, e, viewer, cursor)
	type result struct {
		resp *public.ListManagedClusterChangesResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := e.client.ListManagedClusterChangesWithResponse(context.Background(),
			&public.ListManagedClusterChangesParams{After: &quiet.Cursor, Wait: ptr("50s")}, bearer(viewer))
		done <- result{resp, err}
	}()
	g.Consistently(done).WithTimeout(300*time.Millisecond).ShouldNot(gomega.Receive(), "the long-poll answered with nothing new")
	ingestFeed(t, e, hub, []string{"mc-woken"}, nil)
	var got result
	g.Eventually(done).WithTimeout(10*time.Second).Should(gomega.Receive(&got), "the long-poll was not woken by the ingest")
	g.Expect(got.err).NotTo(gomega.HaveOccurred())
	g.Expect(got.resp.JSON200).NotTo(gomega.BeNil(), "ListManagedClusterChanges(wait) = %s", outcome(got.resp, got.err))
	g.Expect(feedNames(got.resp.JSON200)).To(gomega.Equal([]string{"mc-woken"}))

	// Nothing new within the wait: 200, no items, a cursor to keep.
	began := time.Now()
	resp, err := e.client.ListManagedClusterChangesWithResponse(context.Background(),
		&public.ListManagedClusterChangesParams{After: &got.resp.JSON200.Cursor, Wait: ptr("400ms")}, bearer(viewer))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(resp.JSON200).NotTo(gomega.BeNil(), "ListManagedClusterChanges(wait 400ms) = %s", outcome(resp, err))
	g.Expect(resp.JSON200.Items).To(gomega.BeEmpty())
	g.Expect(resp.JSON200.Cursor).NotTo(gomega.BeEmpty())
	g.Expect(time.Since(began)).To(gomega.BeNumerically(">=", 400*time.Millisecond), "answered before the wait ended")
}

func testFeedErrors(t *testing.T, e *stackEnv, hub admin.Hub) {
	ctx := context.Background()
	viewer := e.viewerToken(t)
	for _, p := range []public.ListManagedClusterChangesParams{{After: ptr("garbage!")}, {Wait: ptr("soon")}} {
		resp, err := e.client.ListManagedClusterChangesWithResponse(ctx, &p, bearer(viewer))
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, "ListManagedClusterChanges(bad)", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	}
	old := listCursor(t, e, viewer)
	ingestFeed(t, e, hub, []string{"mc-doomed"}, nil)
	ingestFeed(t, e, hub, nil, []string{"mc-doomed"})
	db := pgtest.Open(t, e.dbCfg)
	if err := db.Gorm.Exec(`UPDATE managed_clusters SET deleted_at = now() - interval '30 days' WHERE name = 'mc-doomed'`).Error; err != nil {
		t.Fatal(err)
	}
	// The purge takes a tombstone once every older transaction has ended.
	gomega.NewWithT(t).Eventually(func() (int, error) {
		return e.store.PurgeTombstones(ctx, "managed_clusters", time.Now().Add(-7*24*time.Hour), 1000)
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(1), "PurgeTombstones()")
	resp, err := e.client.ListManagedClusterChangesWithResponse(ctx, &public.ListManagedClusterChangesParams{After: &old}, bearer(viewer))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "ListManagedClusterChanges(expired cursor)", e.apiEnv, resp.JSON410, resp.StatusCode(), http.StatusGone, fleet.CodeCursorExpired)
	// The way back: list again, resume from the list's cursor.
	feedEventually(t, e, viewer, listCursor(t, e, viewer))
}
