package rest_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// notResources are the schemas with a kind that are no resource of their
// own, so carry no id and href: answers about a request (acknowledgements,
// results), views computed for the caller, and the agents' documents.
var notResources = map[string]string{
	"CurrentUser":           "the caller's identity, read from its token",
	"ClusterBatchResult":    "the result of one batch request",
	"ClusterCompliance":     "one row of a policy's compliance list, which has no path of its own",
	"ComplianceSummary":     "counts computed per request",
	"PoolEvent":             "one row of a pool's event list, which has no path of its own",
	"DNSService":            "(public spec) a writable service as a list row; its records are at records_href",
	"HubStatusAck":          "the answer to an agent's heartbeat",
	"DesiredSet":            "the hub's desired set, an agent's document",
	"InventoryAck":          "the answer to an agent's inventory batch",
	"RegistrationStatusAck": "the answer to an agent's status report",
	"APIVersion":            "has id and href, optional in the list of versions' shape",
}

// TestSpecResourcesHaveKindIDHref walks every schema of the three specs with
// a kind: each resource requires kind, id and href, as OCM's resources do;
// lists (page, size, total, items) and the documented exceptions do not.
func TestSpecResourcesHaveKindIDHref(t *testing.T) {
	t.Parallel()
	for _, file := range openapi.All() {
		data, err := fs.ReadFile(openapi.Specs, file)
		if err != nil {
			t.Fatalf("ReadFile(%s): %v", file, err)
		}
		doc, err := openapi3.NewLoader().LoadFromData(data)
		if err != nil {
			t.Fatalf("LoadFromData(%s): %v", file, err)
		}
		for name, ref := range doc.Components.Schemas {
			s := ref.Value
			kind := s.Properties["kind"]
			if kind == nil || len(kind.Value.Enum) != 1 {
				continue // no kind, or a Kubernetes object's
			}
			if items := s.Properties["items"]; items != nil && items.Value.Type.Is("array") {
				continue // a list
			}
			if _, ok := notResources[name]; ok && (name != "DNSService" || file == openapi.Public) {
				continue
			}
			for _, field := range []string{"kind", "id", "href"} {
				if !slices.Contains(s.Required, field) {
					t.Errorf("%s: schema %s (kind %v) does not require %s", file, name, kind.Value.Enum[0], field)
				}
			}
		}
	}
}

// TestHrefReadsTheResource reads the managed clusters, a registration and
// the synced objects through their list, get and change feed, and follows
// each one's href: it answers the same resource, with its kind and id.
func TestHrefReadsTheResource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newStackEnv(t, flavours()[1])
	hub := e.createAgentHub(t, "href-hub", "eu", 5)
	ingestFeed(t, e, hub, []string{"mc-href-1", "mc-href-2"}, nil)
	ack, err := e.agent.PostHubResourcesWithResponse(ctx, hub.Id,
		policyBatch(0, true, true, policyReport("ns-1", "p1")), agentAuth(e.agentToken(t, "href-hub-agent")))
	if err != nil || ack.JSON200 == nil || ack.JSON200.Written != 1 {
		t.Fatalf("PostHubResources(p1) = %s; want 1 written", outcome(ack, err))
	}
	viewer, adminTok, user := e.viewerToken(t), e.adminToken(t), e.userToken(t, "org-href", "u")
	cluster := e.createCluster(t, user, public.ClusterCreate{Name: "href-one", Zone: ptr("eu"), Product: public.OCP})

	followed := 0
	follow := func(what, token string, raw json.RawMessage) {
		t.Helper()
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		kind, _ := obj["kind"].(string)
		id, _ := obj["id"].(string)
		href, _ := obj["href"].(string)
		if kind == "" || id == "" || href == "" {
			t.Errorf("%s = %s; want kind, id and href", what, raw)
			return
		}
		status, body := e.rawURLRequest(t, http.MethodGet, e.server.URL+href, token)
		var got map[string]any
		_ = json.Unmarshal([]byte(body), &got)
		if status != http.StatusOK || got["kind"] != kind || got["id"] != id || got["href"] != href {
			t.Errorf("%s: GET its href %s = %d %s; want 200, the %s %s", what, href, status, body, kind, id)
			return
		}
		if kind != "Cluster" && !reflect.DeepEqual(got, obj) { // a registration moves on as it is placed
			t.Errorf("%s: GET its href %s = %s; want what the list showed, %s", what, href, body, raw)
		}
		followed++
	}
	items := func(what, token, path string) []json.RawMessage {
		t.Helper()
		status, body := e.rawRequest(t, http.MethodGet, path, token)
		var list struct{ Items []json.RawMessage }
		if err := json.Unmarshal([]byte(body), &list); status != http.StatusOK || err != nil || len(list.Items) == 0 {
			t.Fatalf("GET %s = %d %s; want 200 with items", path, status, body)
		}
		return list.Items
	}
	for _, item := range items("managed clusters", viewer, "/managed_clusters") {
		follow("a managed cluster of the list", viewer, item)
	}
	for _, item := range items("changes", viewer, "/managed_clusters/changes") {
		var change struct{ Cluster json.RawMessage }
		_ = json.Unmarshal(item, &change)
		follow("a managed cluster of the change feed", viewer, change.Cluster)
	}
	for _, item := range items("resources", adminTok, "/admin/resources?kind=Policy") {
		follow("a synced object of the list", adminTok, item)
	}
	for _, item := range items("resource changes", adminTok, "/admin/resources/changes?kind=Policy") {
		var change struct{ Resource json.RawMessage }
		_ = json.Unmarshal(item, &change)
		follow("a synced object of the change feed", adminTok, change.Resource)
	}
	for _, item := range items("clusters", user, "/clusters") {
		follow("a registration of the list", user, item)
	}
	raw, err := json.Marshal(cluster)
	if err != nil {
		t.Fatal(err)
	}
	follow("the registration created", user, raw)
	if followed != 8 {
		t.Errorf("followed %d hrefs; want 8 (2 clusters twice, an object twice, a registration twice)", followed)
	}
	// The admin client validates the new operation's answer against the spec.
	resources, err := e.admin.ListResourcesWithResponse(ctx, &admin.ListResourcesParams{Kind: "Policy"}, adminAuth(adminTok))
	if err != nil || resources.JSON200 == nil || len(resources.JSON200.Items) != 1 {
		t.Fatalf("ListResources(Policy) = %s; want p1", outcome(resources, err))
	}
	one, err := e.admin.GetResourceWithResponse(ctx, resources.JSON200.Items[0].Id, adminAuth(adminTok))
	if err != nil || one.JSON200 == nil || one.JSON200.Name != "p1" || one.JSON200.Href != resources.JSON200.Items[0].Href {
		t.Errorf("GetResource(p1) = %s; want p1 at its href", outcome(one, err))
	}
	missing, err := e.admin.GetResourceWithResponse(ctx, "no-such-object", adminAuth(adminTok))
	if err != nil || missing.StatusCode() != http.StatusNotFound {
		t.Errorf("GetResource(unknown) = %s; want 404", outcome(missing, err))
	}
}
