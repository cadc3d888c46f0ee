package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// rawResponse is what a request sent by rawCall got back.
type rawResponse struct {
	status int
	header http.Header
	body   string
	err    public.Error
}

// rawCall sends a request as a client that does not follow the spec would:
// any method, path, headers and body bytes. path is below the base path.
func (e *apiEnv) rawCall(t *testing.T, method, path string, header map[string]string, body string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.base+path, rd)
	if err != nil {
		t.Fatalf("NewRequest(%s %s): %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	resp, err := e.server.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	out := rawResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(b, &out.err)
	}
	return out
}

// wantRefused checks a refusal's status and code.
func wantRefused(t *testing.T, e *apiEnv, call string, got rawResponse, status int, code fleet.ErrorCode) {
	t.Helper()
	wantError(t, call, e, &got.err, got.status, status, code)
	if t.Failed() {
		t.Logf("%s answered %d %s", call, got.status, got.body)
	}
}

// secretValue stands for a credential a caller sent by mistake or in a bad
// request: no answer and no log line may repeat it.
const secretValue = "S3cretKubeconfigValue93f1"

// TestRefusalsNameNoValue sends requests that break a rule of the spec or of
// the domain while carrying a secret, and checks the refusal names the field
// and the rule, never the secret, in the answer and in the debug-level log.
func TestRefusalsNameNoValue(t *testing.T) {
	t.Parallel()
	e := newStackEnv(t, flavours()[0])
	tok, adminTok := e.userToken(t, "org-leak", "alice"), e.adminToken(t)
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "leak", Zone: ptr("eu"), Product: public.OCP})
	user := map[string]string{"Authorization": "Bearer " + tok}
	admin := map[string]string{"Authorization": "Bearer " + adminTok}
	with := func(h map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for hk, hv := range h {
			out[hk] = hv
		}
		return out
	}
	q := url.QueryEscape
	cases := []struct {
		call, method, path string
		header             map[string]string
		body               string
		status             int
		code               fleet.ErrorCode
	}{
		{"CreateCluster(name breaks the pattern)", "POST", "/clusters", user,
			`{"name":"` + secretValue + `","product":"OCP","zone":"eu","credentials":{"kubeconfig":"` + secretValue + `"}}`, 400, fleet.CodeValidation},
		{"CreateCluster(unknown property)", "POST", "/clusters", user,
			`{"name":"ok","product":"OCP","credentials":{"kubeconfig":"` + secretValue + `"},"bogus":1}`, 400, fleet.CodeValidation},
		{"CreateCluster(wrong type beside a token)", "POST", "/clusters", user,
			`{"name":"ok","product":"OCP","credentials":{"kubeconfig":5,"token":"` + secretValue + `"}}`, 400, fleet.CodeValidation},
		{"CreateCluster(credentials of the wrong type)", "POST", "/clusters", user,
			`{"name":"ok","product":"OCP","credentials":"` + secretValue + `"}`, 400, fleet.CodeValidation},
		{"CreateCluster(product not in the enum)", "POST", "/clusters", user,
			`{"name":"ok","product":"` + secretValue + `"}`, 400, fleet.CodeValidation},
		{"CreateCluster(label value too long)", "POST", "/clusters", user,
			`{"name":"ok","product":"OCP","labels":{"env":"` + strings.Repeat(secretValue, 3) + `"}}`, 400, fleet.CodeValidation},
		{"CreateCluster(truncated JSON)", "POST", "/clusters", user,
			`{"name":"ok","product":"OCP","credentials":{"token":"` + secretValue, 400, fleet.CodeMalformedBody},
		{"CreateCluster(a secret as a property name)", "POST", "/clusters", user,
			`{"name":"ok","product":"OCP","credentials":{"` + secretValue + ` x":"y"}}`, 400, fleet.CodeValidation},
		{"CreateCluster(Content-Type)", "POST", "/clusters", with(user, "Content-Type", "application/"+secretValue),
			`{"name":"ok","product":"OCP"}`, 415, fleet.CodeUnsupportedMediaType},
		{"CreateHub(URL with credentials)", "POST", "/admin/hubs", admin,
			`{"name":"hub-leak","zone":"eu","region":"eu-1","delivery_mode":"syncset-ocm","capacity":1,` +
				`"ocm":{"cluster_id":"c1","api_url":"https://sre:` + secretValue + `@api.example.com"},"credentials":{"client_id":"id","client_secret":"` + secretValue + `"}}`,
			400, fleet.CodeValidation},
		{"CreateHub(secret with a bad capacity)", "POST", "/admin/hubs", admin,
			`{"name":"hub-leak","zone":"eu","region":"eu-1","delivery_mode":"syncset-ocm","capacity":"` + secretValue + `"}`, 400, fleet.CodeValidation},
		{"CreateClusters(items not an array)", "POST", "/clusters:batch", user, `{"items":"` + secretValue + `"}`, 400, fleet.CodeValidation},
		{"CreateClusters(a secret as a property name)", "POST", "/clusters:batch", user,
			`{"items":[{"name":"ok","product":"OCP"}],"` + secretValue + `":1}`, 400, fleet.CodeValidation},
		{"CreateClusters(truncated JSON)", "POST", "/clusters:batch", user,
			`{"items":[{"name":"ok","product":"OCP","credentials":{"token":"` + secretValue, 400, fleet.CodeMalformedBody},
		{"CreateClusters(too many items)", "POST", "/clusters:batch", user,
			`{"items":[` + strings.Repeat(`{"name":"ok","product":"OCP","credentials":{"kubeconfig":"`+secretValue+`"}},`, e.http.RegistrationBatchMax) +
				`{"name":"ok","product":"OCP"}]}`, 400, fleet.CodeValidation},
		{"ListClusters(page)", "GET", "/clusters?page=" + secretValue, user, "", 400, fleet.CodeValidation},
		{"ListClusters(search string)", "GET", "/clusters?search=" + q("name = '"+secretValue+"' and"), user, "", 400, fleet.CodeBadSearch},
		{"ListClusters(search name)", "GET", "/clusters?search=" + q(secretValue+" = 'x'"), user, "", 400, fleet.CodeBadSearch},
		{"ListClusters(search value of the wrong type)", "GET", "/clusters?search=" + q("created_at = 5 or name = 5"), user, "", 400, fleet.CodeBadSearch},
		{"ListClusters(orderBy)", "GET", "/clusters?orderBy=" + q(secretValue), user, "", 400, fleet.CodeBadOrderBy},
		{"ListClusters(orderBy direction)", "GET", "/clusters?orderBy=" + q("name "+secretValue), user, "", 400, fleet.CodeBadOrderBy},
		{"UpdateCluster(If-Match)", "PATCH", "/clusters/" + c.Id, with(user, "If-Match", `"`+secretValue+`"`), `{"display_name":"x"}`, 412, fleet.CodePreconditionFailed},
		{"ListManagedClusterChanges(wait)", "GET", "/managed_clusters/changes?wait=" + secretValue, user, "", 400, fleet.CodeValidation},
	}
	var items []string
	for _, tc := range cases {
		got := e.rawCall(t, tc.method, tc.path, tc.header, tc.body)
		wantRefused(t, e.apiEnv, tc.call, got, tc.status, tc.code)
		if strings.Contains(strings.ToLower(got.body), strings.ToLower(secretValue)) {
			t.Errorf("%s answered %s: it repeats the value sent", tc.call, got.body)
		}
		if got.err.Reason == "" {
			t.Errorf("%s answered no reason", tc.call)
		}
		if tc.path == "/clusters" && tc.status == 400 && tc.code == fleet.CodeValidation {
			items = append(items, tc.body)
		}
	}
	// The same bodies as items of a batch: each is refused alone, as quietly.
	got := e.rawCall(t, "POST", "/clusters:batch", user, `{"items":[`+strings.Join(items, ",")+`]}`)
	var batch public.ClusterBatchResult
	if err := json.Unmarshal([]byte(got.body), &batch); err != nil || got.status != 200 || len(batch.Items) != len(items) {
		t.Fatalf("CreateClusters(%d refused items) = %d %s, want 200 and a result per item", len(items), got.status, got.body)
	}
	for i, it := range batch.Items {
		wantError(t, fmt.Sprintf("CreateClusters() item %d", i), e.apiEnv, it.Error, it.Status, 400, fleet.CodeValidation)
	}
	if strings.Contains(strings.ToLower(got.body), strings.ToLower(secretValue)) {
		t.Errorf("CreateClusters(refused items) answered %s: it repeats a value sent", got.body)
	}
	if logs := e.logs.String(); strings.Contains(strings.ToLower(logs), strings.ToLower(secretValue)) {
		t.Errorf("the log repeats a value sent:\n%s", logs)
	}
	if !strings.Contains(e.logs.String(), `"msg":"request refused"`) {
		t.Errorf("the log has no refusal at debug level; the test would not see a leak there")
	}
}

// inputEnv is a server with one organisation's registration and one agent
// hub, to send refused requests to.
type inputEnv struct {
	e           *stackEnv
	cluster     public.Cluster
	hub         admin.Hub
	user, agent map[string]string
}

func newInputEnv(t *testing.T, name string) *inputEnv {
	t.Helper()
	e := newStackEnv(t, flavours()[0])
	tok := e.userToken(t, "org-"+name, "alice")
	in := &inputEnv{e: e, cluster: e.createCluster(t, tok, public.ClusterCreate{Name: name, Zone: ptr("eu"), Product: public.OCP}),
		hub: e.createAgentHub(t, name+"-hub", "eu", 1), user: map[string]string{"Authorization": "Bearer " + tok}}
	in.agent = map[string]string{"Authorization": "Bearer " + e.agentToken(t, deref(in.hub.AgentIdentity))}
	return in
}

// wantNothingWritten checks the organisation still has its one registration,
// as it was made.
func (in *inputEnv) wantNothingWritten(t *testing.T) {
	t.Helper()
	got := in.e.rawCall(t, "GET", "/clusters", in.user, "")
	var list public.ClusterList
	if err := json.Unmarshal([]byte(got.body), &list); err != nil || list.Total != 1 || list.Items[0].DisplayName != in.cluster.DisplayName {
		t.Errorf("ListClusters() = %d %s, want the one registration unchanged", got.status, got.body)
	}
}

// TestRefusesTextPostgreSQLCannotStore sends NUL characters and bytes that
// are not UTF-8 wherever a caller's text reaches the database: each is a 400
// that writes nothing, where PostgreSQL's refusal used to answer 500.
func TestRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	in := newInputEnv(t, "nul")
	e, c, hub, user, agent := in.e, in.cluster, in.hub, in.user, in.agent
	withKey := map[string]string{"Authorization": user["Authorization"], "Idempotency-Key": "key-\xff\xfe"}
	cases := []struct {
		call, method, path string
		header             map[string]string
		body               string
		code               fleet.ErrorCode
	}{
		{"CreateCluster(display_name with NUL)", "POST", "/clusters", user, `{"name":"nul-a","product":"OCP","zone":"eu","display_name":"a\u0000b"}`, fleet.CodeValidation},
		{"CreateCluster(label with NUL)", "POST", "/clusters", user, `{"name":"nul-b","product":"OCP","zone":"eu","labels":{"env":"\u0000"}}`, fleet.CodeValidation},
		{"CreateCluster(not UTF-8)", "POST", "/clusters", user, "{\"name\":\"nul-c\",\"product\":\"OCP\",\"zone\":\"eu\",\"display_name\":\"\xff\xfe\"}", fleet.CodeMalformedBody},
		{"CreateCluster(Idempotency-Key not UTF-8)", "POST", "/clusters", withKey, `{"name":"nul-d","product":"OCP","zone":"eu"}`, fleet.CodeValidation},
		{"CreateCluster(kubeconfig with NUL)", "POST", "/clusters", user, `{"name":"nul-e","product":"OCP","zone":"eu","credentials":{"kubeconfig":"a\u0000"}}`, fleet.CodeValidation},
		{"UpdateCluster(display_name with NUL)", "PATCH", "/clusters/" + c.Id, user, `{"display_name":"\u0000"}`, fleet.CodeValidation},
		{"ListClusters(search with NUL)", "GET", "/clusters?search=" + url.QueryEscape("name = 'a\x00'"), user, "", fleet.CodeValidation},
		{"ListManagedClusters(search with NUL)", "GET", "/managed_clusters?search=" + url.QueryEscape("name = '\x00'"), user, "", fleet.CodeValidation},
		{"ListClusters(search not UTF-8)", "GET", "/clusters?search=name%20%3D%20%27%ff%27", user, "", fleet.CodeValidation},
		{"CreatePolicy(body with NUL)", "POST", "/policies", user, `{"name":"nul-p","policy":{"metadata":{"name":"p\u0000"}}}`, fleet.CodeValidation},
		{"PutHubStatus(agent_version with NUL)", "PUT", "/agent-hubs/" + hub.Id + "/status", agent, `{"agent_version":"1\u0000","agent_start_generation":1,"applied_revision":0}`, fleet.CodeValidation},
		{"PostHubInventory(label with NUL)", "POST", "/agent-hubs/" + hub.Id + "/inventory", agent,
			`{"full_sync":false,"clusters":[{"name":"mc-1","labels":{"env":"\u0000"}}]}`, fleet.CodeValidation},
	}
	for _, tc := range cases {
		got := e.rawCall(t, tc.method, tc.path, tc.header, tc.body)
		wantRefused(t, e.apiEnv, tc.call, got, http.StatusBadRequest, tc.code)
	}
	in.wantNothingWritten(t)
	// An escaped backslash before u0000 is text, not a NUL.
	ok := e.rawCall(t, "POST", "/clusters", user, `{"name":"nul-f","product":"OCP","zone":"eu","display_name":"a\\u0000b"}`)
	if ok.status != http.StatusAccepted || !strings.Contains(ok.body, `"display_name":"a\\u0000b"`) {
		t.Errorf("CreateCluster(an escaped backslash, then u0000) = %d %s, want 202 with the text kept", ok.status, ok.body)
	}
	if strings.Contains(e.logs.String(), `"level":"ERROR"`) {
		t.Errorf("the log has an error line:\n%s", e.logs.String())
	}
}

// TestPagesAreBounded asks every list for a page past fleet.MaxPage: a 400,
// where a page whose offset overflowed used to answer the first page, and
// the error catalogue panicked.
func TestPagesAreBounded(t *testing.T) {
	t.Parallel()
	e := newStackEnv(t, flavours()[0])
	tok, adminTok := e.userToken(t, "org-page", "alice"), e.adminToken(t)
	e.createCluster(t, tok, public.ClusterCreate{Name: "page", Zone: ptr("eu"), Product: public.OCP})
	user := map[string]string{"Authorization": "Bearer " + tok}
	admin := map[string]string{"Authorization": "Bearer " + adminTok}
	for _, path := range []string{"/errors", "/clusters", "/policies", "/managed_clusters", "/admin/hubs", "/compliance_summary"} {
		h := user
		if strings.HasPrefix(path, "/admin") {
			h = admin
		}
		for _, page := range []string{"9223372036854775807", "9223372036854775808", "1000001", "4611686018427387905"} {
			call := "GET " + path + "?page=" + page
			got := e.rawCall(t, "GET", path+"?page="+page, h, "")
			if path == "/compliance_summary" {
				// Not a list: the page parameter is unknown there, and ignored.
				if got.status >= 500 {
					t.Errorf("%s = %d %s, want no 5xx", call, got.status, got.body)
				}
				continue
			}
			wantRefused(t, e.apiEnv, call, got, http.StatusBadRequest, fleet.CodeValidation)
		}
	}
	got := e.rawCall(t, "GET", "/clusters?page=1000000&size=1", user, "")
	var list public.ClusterList
	if err := json.Unmarshal([]byte(got.body), &list); got.status != 200 || err != nil || len(list.Items) != 0 || list.Total != 1 {
		t.Errorf("ListClusters(page=%d) = %d %s, want 200, no items, total 1", fleet.MaxPage, got.status, got.body)
	}
}

// TestBodiesEndWithTheirValue sends JSON followed by more data: a 400 that
// writes nothing, where the handler used to read the first value and go on.
func TestBodiesEndWithTheirValue(t *testing.T) {
	t.Parallel()
	in := newInputEnv(t, "trail")
	e, c, hub, user, agent := in.e, in.cluster, in.hub, in.user, in.agent
	cases := []struct{ call, method, path, body string }{
		{"CreateCluster(garbage after)", "POST", "/clusters", `{"name":"trail-a","product":"OCP","zone":"eu"} trailing-garbage`},
		{"CreateCluster(two values)", "POST", "/clusters", `{"name":"trail-b","product":"OCP","zone":"eu"}{"name":"trail-c","product":"OCP"}`},
		{"UpdateCluster(garbage after)", "PATCH", "/clusters/" + c.Id, `{"display_name":"changed"} x`},
		{"PutHubStatus(garbage after)", "PUT", "/agent-hubs/" + hub.Id + "/status", `{"agent_version":"1","agent_start_generation":1,"applied_revision":0}]`},
	}
	for _, tc := range cases {
		got := e.rawCall(t, tc.method, tc.path, map[string]string{"Authorization": pick(tc.path, user, agent)}, tc.body)
		wantRefused(t, e.apiEnv, tc.call, got, http.StatusBadRequest, fleet.CodeMalformedBody)
	}
	in.wantNothingWritten(t)
	if h := e.getHub(t, hub.Id); h.LastHeartbeatAt != nil {
		t.Errorf("GetHub() last heartbeat = %v, want none: the refused heartbeat was recorded", h.LastHeartbeatAt)
	}
	// Blanks after the value are not data.
	ok := e.rawCall(t, "POST", "/clusters", user, "{\"name\":\"trail-d\",\"product\":\"OCP\",\"zone\":\"eu\"} \n\t")
	if ok.status != http.StatusAccepted {
		t.Errorf("CreateCluster(blanks after) = %d %s, want 202", ok.status, ok.body)
	}
}

// pick returns the agent's authorization for the agents' paths, else the user's.
func pick(path string, user, agent map[string]string) string {
	if strings.HasPrefix(path, "/agent-hubs/") {
		return agent["Authorization"]
	}
	return user["Authorization"]
}

// TestUserTokensNeverActAsAnAgent sends a user's token that also names a
// hub's agent identity to every kind of agent operation: each answers as for
// a token of no agent, 404, and records nothing, where the token used to act as the hub's agent (desired
// set with import credentials, inventory writes).
func TestUserTokensNeverActAsAnAgent(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			hub := e.createAgentHub(t, "agent-hub", "eu", 1)
			user := "Bearer " + e.token(t, auth.TokenRequest{OrgID: "org-mallory", Username: "mallory", AgentID: deref(hub.AgentIdentity)})
			base := "/agent-hubs/" + hub.Id
			cases := []struct{ call, method, path, body string }{
				{"GetHubDesired", "GET", base + "/desired", ""},
				{"PutHubStatus", "PUT", base + "/status", `{"agent_version":"1","agent_start_generation":1,"applied_revision":0}`},
				{"PostHubInventory", "POST", base + "/inventory", `{"full_sync":false,"clusters":[{"name":"mc-1"}]}`},
				{"GetResourceKinds", "GET", base + "/resource-kinds", ""},
			}
			for _, tc := range cases {
				got := e.rawCall(t, tc.method, tc.path, map[string]string{"Authorization": user}, tc.body)
				wantRefused(t, e.apiEnv, tc.call+"(a user's token)", got, http.StatusNotFound, fleet.CodeNotFound)
			}
			if h := e.getHub(t, hub.Id); h.LastHeartbeatAt != nil {
				t.Errorf("GetHub() last heartbeat = %v, want none", h.LastHeartbeatAt)
			}
			// The hub's own agent still works.
			agent := "Bearer " + e.agentToken(t, deref(hub.AgentIdentity))
			if got := e.rawCall(t, "PUT", base+"/status", map[string]string{"Authorization": agent}, cases[1].body); got.status != http.StatusOK {
				t.Errorf("PutHubStatus(the agent's token) = %d %s, want 200", got.status, got.body)
			}
		})
	}
}
