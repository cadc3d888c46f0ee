package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestOrgIsolation checks that an organisation can neither see nor touch
// another's clusters, by id, by list or by search, and that a token without
// an organisation cannot register one.
func TestOrgIsolation(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newStackEnv(t, f)
			tokA, tokB := e.userToken(t, "org-a", "alice"), e.userToken(t, "org-b", "bob")
			a := e.createCluster(t, tokA, public.ClusterCreate{Name: "secret-a", Zone: ptr("eu"), Product: public.OCP})
			e.createCluster(t, tokB, public.ClusterCreate{Name: "mine-b", Zone: ptr("eu"), Product: public.OCP})
			noOrg := e.token(t, auth.TokenRequest{Username: "drifter"})

			for _, who := range []struct{ name, tok string }{{"org-b", tokB}, {"no org", noOrg}} {
				calls := []struct {
					call string
					do   func() (*public.Error, int, error)
				}{
					{"GetCluster", func() (*public.Error, int, error) {
						r, err := e.client.GetClusterWithResponse(ctx, a.Id, bearer(who.tok))
						return errOf(r, err, func() *public.Error { return r.JSON404 })
					}},
					{"UpdateCluster", func() (*public.Error, int, error) {
						r, err := e.client.UpdateClusterWithResponse(ctx, a.Id, &public.UpdateClusterParams{IfMatch: ptr(`"1"`)},
							public.ClusterPatch{DisplayName: ptr("stolen")}, bearer(who.tok))
						return errOf(r, err, func() *public.Error { return r.JSON404 })
					}},
					{"DeleteCluster", func() (*public.Error, int, error) {
						r, err := e.client.DeleteClusterWithResponse(ctx, a.Id, bearer(who.tok))
						return errOf(r, err, func() *public.Error { return r.JSON404 })
					}},
				}
				for _, c := range calls {
					body, status, err := c.do()
					if err != nil {
						t.Fatalf("%s(%s) as %s: %v", c.call, a.Id, who.name, err)
					}
					wantError(t, c.call+"(org-a's cluster) as "+who.name, e.apiEnv, body, status, http.StatusNotFound, fleet.CodeNotFound)
				}
			}

			searches := []struct {
				tok, search string
				want        int
			}{
				{tokB, "", 1},
				{tokB, "id = '" + a.Id + "'", 0},
				{tokB, "name = 'secret-a'", 0},
				{tokB, "name = 'secret-a' or name = 'mine-b'", 1},
				{noOrg, "", 0},
				{noOrg, "id = '" + a.Id + "'", 0},
				{tokA, "id = '" + a.Id + "'", 1},
				{tokA, "", 1},
			}
			for _, s := range searches {
				if got := clusterTotal(t, e, s.tok, s.search); got != s.want {
					t.Errorf("ListClusters(search %q) = total %d, want %d", s.search, got, s.want)
				}
			}

			// Org A's cluster is as it was.
			got, err := e.client.GetClusterWithResponse(ctx, a.Id, bearer(tokA))
			if err != nil || got.JSON200 == nil || got.JSON200.Generation != 1 || got.JSON200.DeletionRequestedAt != nil || got.JSON200.DisplayName != "" {
				t.Errorf("GetCluster(%s) as org-a = %s; want it unchanged", a.Id, outcome(got, err))
			}

			refused, err := e.client.CreateClusterWithResponse(ctx, nil,
				public.ClusterCreate{Name: "orphan", Zone: ptr("eu"), Product: public.OCP}, bearer(noOrg))
			if err != nil {
				t.Fatalf("CreateCluster(orphan) without an org: %v", err)
			}
			wantError(t, "CreateCluster(orphan) without an org", e.apiEnv, refused.JSON403, refused.StatusCode(), http.StatusForbidden, fleet.CodeOrgNotAllowed)
		})
	}
}

// errOf returns a response's status and the error body pick chooses.
func errOf(resp response, err error, pick func() *public.Error) (*public.Error, int, error) {
	if err != nil {
		return nil, 0, err
	}
	return pick(), resp.StatusCode(), nil
}
