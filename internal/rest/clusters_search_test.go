package rest_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// searchFleet is the organisation's clusters the search tests look through.
var searchFleet = []struct {
	name, zone, region string
	product            public.Product
	labels             public.Labels
}{
	{"alpha", "eu", "eu-west-1", public.OCP, public.Labels{"env": "prod", "team": "red"}},
	{"bravo", "eu", "eu-west-1", public.ROSA, public.Labels{"env": "dev", "team": "blue"}},
	{"charlie", "eu", "eu-central-1", public.OCP, public.Labels{"env": "prod"}},
	{"delta", "us", "us-east-1", public.EKS, public.Labels{"env": "staging", "team": "red"}},
	{"echo", "us", "us-west-2", public.AKS, public.Labels{}},
	{"foxtrot", "us", "us-east-1", public.OCP, public.Labels{"env": "prod", "team": "blue"}},
	{"golf", "apac", "ap-south-1", public.GKE, public.Labels{"env": "dev"}},
	{"hotel", "apac", "ap-south-1", public.OCP, public.Labels{"team": "green"}},
	{"india", "eu", "eu-west-1", public.Kubernetes, public.Labels{"env": "prod", "team": "green"}},
	{"juliet", "us", "us-west-2", public.ROSA, public.Labels{"env": "dev"}},
	{"kilo", "apac", "ap-northeast-1", public.ARO, public.Labels{"env": "prod", "team": "red"}},
	{"lima", "eu", "eu-central-1", public.OSD, nil},
}

// TestClusterSearch seeds searchFleet through the API and checks the exact
// set each query finds, the orderings, and the refusals of bad queries.
func TestClusterSearch(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			tok := e.userToken(t, "org-search", "alice")
			for _, c := range searchFleet {
				body := public.ClusterCreate{Name: c.name, DisplayName: ptr(strings.ToUpper(c.name[:1]) + c.name[1:]),
					Zone: ptr(c.zone), Region: ptr(c.region), Product: c.product}
				if c.labels != nil {
					body.Labels = &c.labels
				}
				e.createCluster(t, tok, body)
			}
			// Another organisation's look-alike is never found.
			e.createCluster(t, e.userToken(t, "org-other", "bob"), public.ClusterCreate{Name: "alpha", Zone: ptr("eu"), Product: public.OCP})
			t.Run("search", func(t *testing.T) { testSearchQueries(t, e, tok) })
			t.Run("order_by", func(t *testing.T) { testSearchOrderBy(t, e, tok) })
			t.Run("bad_search", func(t *testing.T) { testBadSearch(t, e, tok) })
			t.Run("bad_order_by", func(t *testing.T) { testBadOrderBy(t, e, tok) })
			t.Run("default_page_size", func(t *testing.T) { testListDefaultPageSize(t, e, tok) })
		})
	}
}

func testSearchQueries(t *testing.T, e *stackEnv, tok string) {
	all := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	cases := []struct {
		search string
		want   []string
	}{
		{"", all},
		{"region = 'eu-west-1'", []string{"alpha", "bravo", "india"}},
		{"zone != 'eu'", []string{"delta", "echo", "foxtrot", "golf", "hotel", "juliet", "kilo"}},
		{"zone <> 'eu' and zone <> 'us'", []string{"golf", "hotel", "kilo"}},
		{"product in ('ROSA', 'EKS')", []string{"bravo", "delta", "juliet"}},
		{"zone not in ('eu', 'us')", []string{"golf", "hotel", "kilo"}},
		{"name like '%a'", []string{"alpha", "delta", "india", "lima"}},
		{"name not like '%a%'", []string{"echo", "foxtrot", "golf", "hotel", "juliet", "kilo"}},
		{"display_name like 'g%'", nil},
		{"display_name ilike 'g%'", []string{"golf"}},
		{"display_name ilike '%L%' and zone = 'eu'", []string{"alpha", "charlie", "lima"}},
		{"labels.env = 'prod'", []string{"alpha", "charlie", "foxtrot", "india", "kilo"}},
		{"labels.team is null", []string{"charlie", "echo", "golf", "juliet", "lima"}},
		{"labels.team is not null and labels.team != 'red'", []string{"bravo", "foxtrot", "hotel", "india"}},
		{"labels.team != 'red'", []string{"bravo", "foxtrot", "hotel", "india"}},
		{"labels.env in ('dev', 'staging')", []string{"bravo", "delta", "golf", "juliet"}},
		{"created_at > '2000-01-01'", all},
		{"created_at < '2000-01-01T00:00:00Z'", nil},
		{"labels.env = 'prod' and zone = 'eu'", []string{"alpha", "charlie", "india"}},
		{"zone = 'apac' or product = 'AKS'", []string{"echo", "golf", "hotel", "kilo"}},
		{"not (zone = 'eu' or zone = 'us')", []string{"golf", "hotel", "kilo"}},
		{"(zone = 'eu' or zone = 'us') and labels.team = 'red'", []string{"alpha", "delta"}},
		{"zone = 'eu' or zone = 'us' and labels.team = 'red'", []string{"alpha", "bravo", "charlie", "delta", "india", "lima"}},
		{"not labels.env = 'prod' and not (product = 'OCP')", []string{"bravo", "delta", "golf", "juliet"}},
		{"phase = 'accepted' and hub_id is null", all},
		{"name = 'alpha' or name = 'nobody'", []string{"alpha"}},
		{"name = 'it''s'", nil},
	}
	for _, tc := range cases {
		resp, err := e.client.ListClustersWithResponse(context.Background(),
			&public.ListClustersParams{Size: ptr(50), Search: ptr(tc.search)}, bearer(tok))
		if err != nil || resp.JSON200 == nil {
			t.Errorf("ListClusters(search %q) = %s; want 200", tc.search, outcome(resp, err))
			continue
		}
		got := clusterNames(resp.JSON200.Items)
		slices.Sort(got)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || resp.JSON200.Total != len(tc.want) {
			t.Errorf("ListClusters(search %q) = %v (total %d), want %v", tc.search, got, resp.JSON200.Total, tc.want)
		}
	}
}

func testSearchOrderBy(t *testing.T, e *stackEnv, tok string) {
	cases := []struct {
		orderBy, search string
		want            []string
	}{
		{"name desc", "", []string{"lima", "kilo", "juliet", "india", "hotel", "golf", "foxtrot", "echo", "delta", "charlie", "bravo", "alpha"}},
		{"region asc, name desc", "", []string{"kilo", "hotel", "golf", "lima", "charlie", "india", "bravo", "alpha", "foxtrot", "delta", "juliet", "echo"}},
		{"zone DESC, product, name", "zone != 'apac'", []string{"echo", "delta", "foxtrot", "juliet", "india", "alpha", "charlie", "lima", "bravo"}},
		{"created_at", "", []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}},
	}
	for _, tc := range cases {
		params := &public.ListClustersParams{Size: ptr(50), OrderBy: ptr(tc.orderBy)}
		if tc.search != "" {
			params.Search = ptr(tc.search)
		}
		resp, err := e.client.ListClustersWithResponse(context.Background(), params, bearer(tok))
		if err != nil || resp.JSON200 == nil {
			t.Errorf("ListClusters(%s) = %s; want 200", describeParams(params), outcome(resp, err))
			continue
		}
		if got := clusterNames(resp.JSON200.Items); !slices.Equal(got, tc.want) {
			t.Errorf("ListClusters(%s) = %v, want %v", describeParams(params), got, tc.want)
		}
	}
	page, err := e.client.ListClustersWithResponse(context.Background(),
		&public.ListClustersParams{Page: ptr(2), Size: ptr(5), OrderBy: ptr("name desc")}, bearer(tok))
	if err != nil || page.JSON200 == nil || !slices.Equal(clusterNames(page.JSON200.Items), []string{"golf", "foxtrot", "echo", "delta", "charlie"}) {
		t.Errorf("ListClusters(page 2, size 5, name desc) = %s; want golf..charlie", outcome(page, err))
	}
}

func testBadSearch(t *testing.T, e *stackEnv, tok string) {
	cases := []struct {
		search, reason string
	}{
		{"name = ", "position 8"},
		{"(name = 'a'", "position 12"},
		{"name = 'a' region = 'b'", "position 12"},
		{"colour = 'red'", "position 1"},
		{"name = 'a' and colour = 'red'", "position 16"},
		{"created_at > 'yesterday'", "position 14"},
		{"labels = 'x'", "position 1"},
		{"name.first = 'x'", "position 1"},
		{"created_at like '2020%'", "position 1"},
		{"name like 'a\\'", "position 11"},
		{"name = 'abc", "position 8"},
		{"org_id = 'org-other'", "position 1"},
	}
	for _, tc := range cases {
		resp, err := e.client.ListClustersWithResponse(context.Background(),
			&public.ListClustersParams{Size: ptr(50), Search: ptr(tc.search)}, bearer(tok))
		if err != nil {
			t.Fatalf("ListClusters(search %q): %v", tc.search, err)
		}
		wantError(t, "ListClusters(search "+tc.search+")", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeBadSearch)
		if resp.JSON400 != nil && !strings.Contains(resp.JSON400.Reason, tc.reason) {
			t.Errorf("ListClusters(search %q): reason = %q, want it to name %s", tc.search, resp.JSON400.Reason, tc.reason)
		}
	}
}

func testBadOrderBy(t *testing.T, e *stackEnv, tok string) {
	cases := []struct {
		orderBy, reason string
	}{
		{"colour", "unknown orderBy field in term 1; allowed fields: created_at"},
		{"name sideways", "invalid orderBy direction for 'name'"},
		{"name, name desc", "more than once"},
		{"name asc desc", "invalid orderBy term 1"},
		{"labels", "unknown orderBy field in term 1"},
		{"name,", "invalid orderBy term 2"},
		{"name; drop table registrations", "invalid orderBy term 1"},
	}
	for _, tc := range cases {
		resp, err := e.client.ListClustersWithResponse(context.Background(),
			&public.ListClustersParams{Size: ptr(50), OrderBy: ptr(tc.orderBy)}, bearer(tok))
		if err != nil {
			t.Fatalf("ListClusters(orderBy %q): %v", tc.orderBy, err)
		}
		wantError(t, "ListClusters(orderBy "+tc.orderBy+")", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeBadOrderBy)
		if resp.JSON400 != nil && !strings.Contains(resp.JSON400.Reason, tc.reason) {
			t.Errorf("ListClusters(orderBy %q): reason = %q, want it to name %q", tc.orderBy, resp.JSON400.Reason, tc.reason)
		}
	}
	for _, size := range []int{51, 1000} {
		resp, err := e.client.ListClustersWithResponse(context.Background(), &public.ListClustersParams{Size: ptr(size)}, bearer(tok))
		if err != nil {
			t.Fatalf("ListClusters(size=%d): %v", size, err)
		}
		wantError(t, "ListClusters(size above --max-page-size)", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	}
}

// testListDefaultPageSize lists without a size parameter on a deployment
// whose --max-page-size (50) is below the spec's default size (100): the
// service must answer a page of at most its maximum, not refuse the request.
func testListDefaultPageSize(t *testing.T, e *stackEnv, tok string) {
	clusters, err := e.client.ListClustersWithResponse(context.Background(), nil, bearer(tok))
	if err != nil || clusters.JSON200 == nil || clusters.JSON200.Total != len(searchFleet) || clusters.JSON200.Size != len(searchFleet) {
		t.Errorf("ListClusters() with --max-page-size 50 = %s; want 200 with the %d clusters", outcome(clusters, err), len(searchFleet))
	}
	hubs, err := e.admin.ListHubsWithResponse(context.Background(), &admin.ListHubsParams{}, adminAuth(e.adminToken(t)))
	if err != nil || hubs.JSON200 == nil || hubs.JSON200.Total != 0 {
		t.Errorf("ListHubs() with --max-page-size 50 = %s; want 200 with no hub", outcome(hubs, err))
	}
}

// clusterNames lists the names of items, in order.
func clusterNames(items []public.Cluster) []string {
	names := make([]string, len(items))
	for i, c := range items {
		names[i] = c.Name
	}
	return names
}

// describeParams renders list parameters for messages.
func describeParams(p *public.ListClustersParams) string {
	if p == nil {
		return "defaults"
	}
	var parts []string
	if p.Page != nil {
		parts = append(parts, "page="+strconv.Itoa(*p.Page))
	}
	if p.Size != nil {
		parts = append(parts, "size="+strconv.Itoa(*p.Size))
	}
	if p.Search != nil {
		parts = append(parts, "search="+*p.Search)
	}
	if p.OrderBy != nil {
		parts = append(parts, "orderBy="+*p.OrderBy)
	}
	return strings.Join(parts, ", ")
}
