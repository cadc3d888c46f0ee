package rest_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// specOperation is one operation of a loaded spec.
type specOperation struct {
	file, method, path string
	op                 *openapi3.Operation
}

// specOperations loads the three specs and lists their operations.
func specOperations(t *testing.T) []specOperation {
	t.Helper()
	var ops []specOperation
	for _, file := range openapi.All() {
		data, err := fs.ReadFile(openapi.Specs, file)
		if err != nil {
			t.Fatalf("ReadFile(%s): %v", file, err)
		}
		doc, err := openapi3.NewLoader().LoadFromData(data)
		if err != nil {
			t.Fatalf("LoadFromData(%s): %v", file, err)
		}
		for _, path := range doc.Paths.InMatchingOrder() {
			for method, op := range doc.Paths.Value(path).Operations() {
				ops = append(ops, specOperation{file: file, method: method, path: path, op: op})
			}
		}
	}
	return ops
}

// concretePath fills an operation's path parameters with values the spec
// accepts; no resource needs to exist for what the tests send.
func concretePath(path string) string {
	return regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllStringFunc(path, func(p string) string {
		if p == "{version}" {
			return "1"
		}
		return "x1"
	})
}

// TestSpecPageSizeIsTheServers walks every list operation's size parameter
// in the three specs: its maximum is fleet.MaxPageSize, the largest page the
// server answers, and a size one above it is refused with 400, while the
// maximum itself is a page on a deployment with the default configuration.
func TestSpecPageSizeIsTheServers(t *testing.T) {
	t.Parallel()
	if got := postgres.DefaultStoreConfig().MaxPageSize; got != fleet.MaxPageSize {
		t.Errorf("DefaultStoreConfig().MaxPageSize = %d, want fleet.MaxPageSize %d", got, fleet.MaxPageSize)
	}
	e := newStackEnvWith(t, flavours()[0], postgres.DefaultStoreConfig())
	tokens := map[string]string{openapi.Public: e.userToken(t, "org-size", "u"), openapi.Admin: e.adminToken(t)}
	checked := 0
	for _, o := range specOperations(t) {
		p := o.op.Parameters.GetByInAndName("query", "size")
		if p == nil {
			continue
		}
		checked++
		name := o.method + " " + o.path
		schema := p.Schema.Value
		if schema.Max == nil || int(*schema.Max) != fleet.MaxPageSize || schema.Min == nil || *schema.Min != 1 {
			t.Errorf("%s (%s): size is %v to %v, want 1 to fleet.MaxPageSize %d", name, o.file, schema.Min, schema.Max, fleet.MaxPageSize)
		}
		status, body := e.rawRequest(t, o.method, concretePath(o.path)+"?kind=ManagedCluster&size=501", tokens[o.file])
		if status != http.StatusBadRequest || !strings.Contains(body, `"size`) {
			t.Errorf("%s?size=%d = %d %s; want 400 naming size", name, fleet.MaxPageSize+1, status, body)
		}
	}
	if checked < 10 {
		t.Errorf("the specs have %d operations with a size parameter; want every list's", checked)
	}
	status, body := e.rawRequest(t, http.MethodGet, "/clusters?size=500", tokens[openapi.Public])
	if status != http.StatusOK {
		t.Errorf("GET /clusters?size=%d = %d %s; want 200", fleet.MaxPageSize, status, body)
	}
}

// listTables names, for each list operation of the specs, its table in
// postgres.ListFields.
var listTables = map[string]string{
	"listClusters": "clusters", "listManagedClusters": "managed_clusters", "listPolicies": "policies",
	"listPolicyCompliance": "policy_compliance", "listBlueprints": "blueprints", "listBlueprintVersions": "blueprint_versions",
	"listCapacityPools": "capacity_pools", "listCapacityPoolClusters": "capacity_pool_clusters", "listReservations": "reservations",
	"listCapacityPoolEvents": "capacity_pool_events", "listDNSRecords": "dns_records", "listHubs": "hubs",
	"listResources": "resources", "listDNSZones": "dns_zones", "listDNSServices": "dns_services",
}

// specFields reads the fields a parameter's description lists after label,
// e.g. "Searchable fields: `a`, `b`."
func specFields(t *testing.T, name string, p *openapi3.Parameter, label string) []string {
	t.Helper()
	if p == nil {
		t.Errorf("%s: no parameter for %s", name, label)
		return nil
	}
	m := regexp.MustCompile(label + `: ((?:` + "`[^`]+`" + `(?:, )?)+)`).FindStringSubmatch(p.Description)
	if m == nil {
		t.Errorf("%s: the %s parameter's description does not say %q", name, p.Name, label+": `a`, `b`")
		return nil
	}
	var fields []string
	for f := range strings.SplitSeq(m[1], ", ") {
		fields = append(fields, strings.Trim(f, "`"))
	}
	return fields
}

// TestSpecListsTheSearchableFields holds the fields each list operation's
// search and orderBy descriptions list in the specs equal to the fields the
// server's queries accept (postgres.ListFields), so neither drifts.
func TestSpecListsTheSearchableFields(t *testing.T) {
	t.Parallel()
	tables := postgres.ListFields()
	seen := map[string]bool{}
	for _, o := range specOperations(t) {
		search := o.op.Parameters.GetByInAndName("query", "search")
		orderBy := o.op.Parameters.GetByInAndName("query", "orderBy")
		if search == nil && orderBy == nil {
			continue
		}
		name := o.op.OperationID
		table, ok := tables[listTables[name]]
		if !ok {
			t.Errorf("%s (%s %s) takes search or orderBy but names no table of postgres.ListFields", name, o.method, o.path)
			continue
		}
		seen[listTables[name]] = true
		if got := specFields(t, name, search, "Searchable fields"); !slices.Equal(got, table.Search) {
			t.Errorf("%s: the spec lists searchable fields %v; the server accepts %v", name, got, table.Search)
		}
		if got := specFields(t, name, orderBy, "Orderable fields"); !slices.Equal(got, table.OrderBy) {
			t.Errorf("%s: the spec lists orderable fields %v; the server accepts %v", name, got, table.OrderBy)
		}
	}
	for table := range tables {
		if !seen[table] {
			t.Errorf("postgres.ListFields()[%q] is the fields of no list operation of the specs", table)
		}
	}
}

// rawRequest sends a request with token to path under the base path and
// returns the status and body.
func (e *apiEnv) rawRequest(t *testing.T, method, path, token string) (int, string) {
	t.Helper()
	return e.rawURLRequest(t, method, e.base+path, token)
}

// rawURLRequest sends a request with token to url and returns the status and body.
func (e *apiEnv) rawURLRequest(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatalf("NewRequest(%s %s): %v", method, url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.server.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	return resp.StatusCode, string(raw)
}

// TestAPIMetadata reads, without a token, the version's metadata at the base
// path (with and without its trailing slash) and the API's versions at the
// path above it, as OCM services answer them, in both flavours; every
// collection it links answers a list of its kind.
func TestAPIMetadata(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newAPIEnv(t, f)
			resp, err := e.client.GetAPIVersionWithResponse(context.Background())
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("GetAPIVersion() = %s; want 200", outcome(resp, err))
			}
			v := *resp.JSON200
			wantID := path.Base(f.http.BasePath)
			if v.Kind != public.APIVersionKindAPIVersion || v.Id != wantID || v.Href != f.http.BasePath || v.ServerVersion == nil || *v.ServerVersion == "" {
				t.Errorf("GetAPIVersion() = {kind %s, id %s, href %s, server_version %v}; want {APIVersion, %s, %s, set}",
					v.Kind, v.Id, v.Href, v.ServerVersion, wantID, f.http.BasePath)
			}
			if v.Collections == nil {
				t.Fatalf("GetAPIVersion() has no collections")
			}
			var ids []string
			token := e.userToken(t, "org-meta", "u")
			for _, c := range *v.Collections {
				ids = append(ids, c.Id)
				if c.Href != f.http.BasePath+"/"+c.Id {
					t.Errorf("collection %s: href %s, want %s", c.Id, c.Href, f.http.BasePath+"/"+c.Id)
				}
				status, body := e.rawRequest(t, http.MethodGet, "/"+c.Id, token)
				var list struct{ Kind string }
				_ = json.Unmarshal([]byte(body), &list)
				if status != http.StatusOK || list.Kind != c.Kind {
					t.Errorf("GET %s = %d %s; want 200 and a %s", c.Href, status, body, c.Kind)
				}
			}
			for _, want := range []string{"clusters", "managed_clusters", "policies", "errors"} {
				if !slices.Contains(ids, want) {
					t.Errorf("GetAPIVersion() collections %v; want %s among them", ids, want)
				}
			}

			status, body := e.rawRequest(t, http.MethodGet, "", "")
			var bare public.APIVersion
			if err := json.Unmarshal([]byte(body), &bare); status != http.StatusOK || err != nil || bare.Href != f.http.BasePath || bare.Collections == nil {
				t.Errorf("GET %s (no trailing slash) = %d %s; want 200, the version's metadata", f.http.BasePath, status, body)
			}

			parent := path.Dir(f.http.BasePath)
			status, body = e.rawURLRequest(t, http.MethodGet, e.server.URL+parent, "")
			var meta struct {
				Kind, Id, Href string
				Versions       []public.APIVersion
			}
			if err := json.Unmarshal([]byte(body), &meta); status != http.StatusOK || err != nil {
				t.Fatalf("GET %s = %d %s; want 200", parent, status, body)
			}
			if meta.Kind != "API" || meta.Id != path.Base(parent) || meta.Href != parent || len(meta.Versions) != 1 ||
				meta.Versions[0].Kind != public.APIVersionKindAPIVersion || meta.Versions[0].Id != wantID || meta.Versions[0].Href != f.http.BasePath {
				t.Errorf("GET %s = %s; want {kind API, id %s, href %s, versions [{APIVersion %s %s}]}", parent, body, path.Base(parent), parent, wantID, f.http.BasePath)
			}
		})
	}
}

// TestSpecOperationsHaveExamples checks that every operation of the three
// specs shows an example of its request body and of each successful answer
// with a body, in every media type, and that the examples are valid: the
// loader validates each example against its schema.
func TestSpecOperationsHaveExamples(t *testing.T) {
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
		if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
			t.Errorf("%s: %v", file, err)
		}
		if doc.Info.Contact == nil || doc.Info.Contact.URL == "" {
			t.Errorf("%s: info.contact has no url", file)
		}
		for _, path := range doc.Paths.InMatchingOrder() {
			for method, op := range doc.Paths.Value(path).Operations() {
				name := file + ": " + method + " " + path
				if op.RequestBody != nil {
					for mediaType, media := range op.RequestBody.Value.Content {
						if media.Example == nil && len(media.Examples) == 0 {
							t.Errorf("%s: the %s request body has no example", name, mediaType)
						}
					}
				}
				for status, resp := range op.Responses.Map() {
					if !strings.HasPrefix(status, "2") {
						continue
					}
					for mediaType, media := range resp.Value.Content {
						if media.Example == nil && len(media.Examples) == 0 {
							t.Errorf("%s: the %s %s answer has no example", name, status, mediaType)
						}
					}
				}
			}
		}
	}
}
