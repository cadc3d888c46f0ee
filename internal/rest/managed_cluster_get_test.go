package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestGetManagedCluster reads one cluster of the inventory by id: the same
// cluster the list shows, 404 to another org, for an unknown id and once the
// hub deleted it.
func TestGetManagedCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newStackEnv(t, flavours()[0])
	hub := e.createAgentHub(t, "get-hub", "eu", 5)
	ingestFeed(t, e, hub, []string{"mc-one", "mc-two"}, nil)
	viewer, stranger := e.viewerToken(t), e.userToken(t, "org-get", "someone")
	list, err := e.client.ListManagedClustersWithResponse(ctx, &public.ListManagedClustersParams{Search: ptr("name = 'mc-one'")}, bearer(viewer))
	if err != nil || list.JSON200 == nil || len(list.JSON200.Items) != 1 {
		t.Fatalf("ListManagedClusters(name = 'mc-one') = %s; want one cluster", outcome(list, err))
	}
	want := list.JSON200.Items[0]
	got, err := e.client.GetManagedClusterWithResponse(ctx, want.Id, bearer(viewer))
	if err != nil || got.JSON200 == nil {
		t.Fatalf("GetManagedCluster(%s) = %s; want 200", want.Id, outcome(got, err))
	}
	if got.JSON200.Id != want.Id || got.JSON200.Name != "mc-one" || got.JSON200.Hub.Id != hub.Id || got.JSON200.Joined != want.Joined {
		t.Errorf("GetManagedCluster(%s) = %+v; want the listed %+v", want.Id, *got.JSON200, want)
	}
	ingestFeed(t, e, hub, nil, []string{"mc-one"})
	for _, tc := range []struct{ name, id, tok string }{
		{"another org's user", want.Id, stranger},
		{"an unknown id", "no-such-cluster", viewer},
		{"a cluster deleted on its hub", want.Id, viewer},
	} {
		resp, err := e.client.GetManagedClusterWithResponse(ctx, tc.id, bearer(tc.tok))
		if err != nil {
			t.Fatalf("GetManagedCluster(%s) as %s: %v", tc.id, tc.name, err)
		}
		wantError(t, "GetManagedCluster("+tc.name+")", e.apiEnv, resp.JSON404, resp.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	}
}
