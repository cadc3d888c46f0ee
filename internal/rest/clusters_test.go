package rest_test

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The secrets the create tests send; no response body may ever carry them.
const (
	kubeconfigSecret = "kc-secret-5d1e0b9a7f"
	tokenSecret      = "sha256~tok-secret-93c4e8a2"
)

var testKubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: " + kubeconfigSecret + "\n"

// TestClusters drives the cluster registration endpoints of the public API
// under each flavour; each subtest works in its own organisation.
func TestClusters(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			t.Run("create", func(t *testing.T) { testClusterCreate(t, e) })
			t.Run("get", func(t *testing.T) { testClusterGet(t, e) })
			t.Run("list_paging", func(t *testing.T) { testClusterListPaging(t, e) })
			t.Run("update", func(t *testing.T) { testClusterUpdate(t, e) })
			t.Run("idempotency", func(t *testing.T) { testClusterIdempotency(t, e) })
			t.Run("name_taken", func(t *testing.T) { testClusterNameTaken(t, e) })
			t.Run("validation", func(t *testing.T) { testClusterValidation(t, e) })
			// Last: it starts the reconcilers, which act on every cluster.
			t.Run("delete", func(t *testing.T) { testClusterDelete(t, e) })
		})
	}
}

func testClusterCreate(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-create", "alice")
	cases := []struct {
		name    string
		creds   *public.ImportCredentials
		secrets []string
	}{
		{"with-kubeconfig", &public.ImportCredentials{Kubeconfig: ptr(testKubeconfig)}, []string{kubeconfigSecret}},
		{"with-token", &public.ImportCredentials{ApiUrl: ptr("https://api.c1.example.test:6443"), Token: ptr(tokenSecret)}, []string{tokenSecret}},
		{"without-credentials", nil, nil},
	}
	for _, tc := range cases {
		body := public.ClusterCreate{Name: tc.name, DisplayName: ptr("Cluster " + tc.name), Labels: &public.Labels{"env": "prod"},
			Zone: ptr("eu"), Region: ptr("eu-west-1"), Product: public.ROSA, Credentials: tc.creds}
		resp, err := e.client.CreateClusterWithResponse(ctx, nil, body, bearer(tok))
		if err != nil || resp.JSON202 == nil {
			t.Fatalf("CreateCluster(%s) = %s; want 202", tc.name, outcome(resp, err))
		}
		c := *resp.JSON202
		if loc := resp.HTTPResponse.Header.Get("Location"); loc != e.http.BasePath+"/clusters/"+c.Id || c.Href != loc {
			t.Errorf("CreateCluster(%s): Location %q, href %q; want %s/clusters/%s", tc.name, loc, c.Href, e.http.BasePath, c.Id)
		}
		if etag := resp.HTTPResponse.Header.Get("ETag"); etag != `"1"` {
			t.Errorf("CreateCluster(%s): ETag = %q, want %q", tc.name, etag, `"1"`)
		}
		if replayed := resp.HTTPResponse.Header.Get("Idempotency-Replayed"); replayed != "" {
			t.Errorf("CreateCluster(%s): Idempotency-Replayed = %q on a first request, want none", tc.name, replayed)
		}
		wantCreds := tc.creds != nil
		if c.Kind != public.ClusterKindCluster || c.Name != tc.name || c.DisplayName != "Cluster "+tc.name ||
			!maps.Equal(c.Labels, public.Labels{"env": "prod"}) || c.Zone != "eu" || c.Region != "eu-west-1" ||
			c.Product != public.ROSA || c.HasCredentials != wantCreds || c.Phase != public.Accepted ||
			c.Generation != 1 || c.Hub != nil || c.DeletionRequestedAt != nil || c.CreatedBy == nil || *c.CreatedBy != "alice" {
			t.Errorf("CreateCluster(%s) = %+v, want the request's fields, has_credentials %v, phase accepted, generation 1, created_by alice", tc.name, c, wantCreds)
		}
		if !hasCondition(c, fleet.ConditionAccepted, public.ConditionStatusTrue, fleet.ReasonValidated) {
			t.Errorf("CreateCluster(%s): %s, want Accepted=True (Validated)", tc.name, describeCluster(c))
		}
		assertNoSecrets(t, e, tok, c, resp.Body, tc.secrets)
	}
}

// assertNoSecrets reads c every way the public API offers and fails t if a
// secret appears in any raw response body or in the service's log.
func assertNoSecrets(t *testing.T, e *stackEnv, tok string, c public.Cluster, created []byte, secrets []string) {
	t.Helper()
	ctx := context.Background()
	got, err := e.client.GetClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil || got.JSON200 == nil || got.JSON200.HasCredentials != c.HasCredentials {
		t.Fatalf("GetCluster(%s) = %s; want 200 with has_credentials %v", c.Name, outcome(got, err), c.HasCredentials)
	}
	list, err := e.client.ListClustersWithResponse(ctx, &public.ListClustersParams{Size: ptr(50)}, bearer(tok))
	if err != nil || list.JSON200 == nil {
		t.Fatalf("ListClusters() = %s; want 200", outcome(list, err))
	}
	patched, err := e.client.UpdateClusterWithResponse(ctx, c.Id, nil, public.ClusterPatch{DisplayName: ptr("renamed")}, bearer(tok))
	if err != nil || patched.JSON200 == nil || patched.JSON200.HasCredentials != c.HasCredentials {
		t.Fatalf("UpdateCluster(%s) = %s; want 200 with has_credentials %v", c.Name, outcome(patched, err), c.HasCredentials)
	}
	bodies := map[string][]byte{"CreateCluster": created, "GetCluster": got.Body, "ListClusters": list.Body, "UpdateCluster": patched.Body}
	for _, secret := range secrets {
		for call, body := range bodies {
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("%s(%s): the response body contains the credential %q", call, c.Name, secret)
			}
		}
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the service log contains the credential %q", secret)
		}
	}
}

func testClusterGet(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-get", "alice")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "get-me", Zone: ptr("eu"), Product: public.OCP})
	got, err := e.client.GetClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil || got.JSON200 == nil {
		t.Fatalf("GetCluster(%s) = %s; want 200", c.Id, outcome(got, err))
	}
	if got.JSON200.Id != c.Id || got.JSON200.Name != "get-me" || !got.JSON200.CreatedAt.Equal(c.CreatedAt) {
		t.Errorf("GetCluster(%s) = %+v, want %+v", c.Id, *got.JSON200, c)
	}
	if etag := got.HTTPResponse.Header.Get("ETag"); etag != `"1"` {
		t.Errorf("GetCluster(%s): ETag = %q, want %q", c.Id, etag, `"1"`)
	}
	cases := []struct {
		id     string
		status int
		code   fleet.ErrorCode
	}{
		{"0190a6f0-0000-7000-8000-000000000000", http.StatusNotFound, fleet.CodeNotFound},
		{"no-such-cluster", http.StatusNotFound, fleet.CodeNotFound},
		{"bad_id!", http.StatusBadRequest, fleet.CodeValidation},
		{strings.Repeat("a", 65), http.StatusBadRequest, fleet.CodeValidation},
	}
	for _, tc := range cases {
		resp, err := e.client.GetClusterWithResponse(ctx, tc.id, bearer(tok))
		if err != nil {
			t.Fatalf("GetCluster(%.20s): %v", tc.id, err)
		}
		body := resp.JSON404
		if tc.status == http.StatusBadRequest {
			body = resp.JSON400
		}
		wantError(t, "GetCluster("+tc.id[:min(len(tc.id), 20)]+")", e.apiEnv, body, resp.StatusCode(), tc.status, tc.code)
	}
}

func testClusterListPaging(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-list", "alice")
	var created []string
	for _, name := range []string{"list-e", "list-c", "list-a", "list-d", "list-b"} {
		created = append(created, e.createCluster(t, tok, public.ClusterCreate{Name: name, Zone: ptr("eu"), Product: public.OCP}).Name)
	}
	cases := []struct {
		params   *public.ListClustersParams
		wantPage int
		want     []string
	}{
		{&public.ListClustersParams{Page: ptr(1), Size: ptr(2)}, 1, created[0:2]},
		{&public.ListClustersParams{Page: ptr(2), Size: ptr(2)}, 2, created[2:4]},
		{&public.ListClustersParams{Page: ptr(3), Size: ptr(2)}, 3, created[4:]},
		{&public.ListClustersParams{Page: ptr(4), Size: ptr(2)}, 4, nil},
		{&public.ListClustersParams{Size: ptr(50)}, 1, created},
		{&public.ListClustersParams{Page: ptr(1), Size: ptr(5), OrderBy: ptr("created_at")}, 1, created},
	}
	for _, tc := range cases {
		resp, err := e.client.ListClustersWithResponse(ctx, tc.params, bearer(tok))
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("ListClusters(%s) = %s; want 200", describeParams(tc.params), outcome(resp, err))
		}
		got := resp.JSON200
		if names := clusterNames(got.Items); got.Page != tc.wantPage || got.Size != len(tc.want) || got.Total != len(created) ||
			strings.Join(names, ",") != strings.Join(tc.want, ",") || got.Kind != public.ClusterListKindClusterList {
			t.Errorf("ListClusters(%s) = page %d, size %d, total %d, %v; want page %d, size %d, total %d, %v",
				describeParams(tc.params), got.Page, got.Size, got.Total, names, tc.wantPage, len(tc.want), len(created), tc.want)
		}
	}
	resp, err := e.client.ListClustersWithResponse(ctx, &public.ListClustersParams{Size: ptr(51)}, bearer(tok))
	if err != nil {
		t.Fatalf("ListClusters(size=51): %v", err)
	}
	wantError(t, "ListClusters(size=51)", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
}

func testClusterUpdate(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-update", "alice")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "patch-me", Zone: ptr("eu"), Product: public.OCP,
		Labels: &public.Labels{"env": "dev"}})
	steps := []struct {
		ifMatch  string
		patch    public.ClusterPatch
		status   int
		wantETag string
		code     fleet.ErrorCode
	}{
		{`"1"`, public.ClusterPatch{Labels: &public.Labels{"env": "prod", "tier": "gold"}, DisplayName: ptr("Patched")}, http.StatusOK, `"2"`, 0},
		{`"1"`, public.ClusterPatch{DisplayName: ptr("stale")}, http.StatusPreconditionFailed, "", fleet.CodePreconditionFailed},
		{`not-an-etag`, public.ClusterPatch{DisplayName: ptr("garbage")}, http.StatusPreconditionFailed, "", fleet.CodePreconditionFailed},
		{`"99"`, public.ClusterPatch{DisplayName: ptr("future")}, http.StatusPreconditionFailed, "", fleet.CodePreconditionFailed},
		{`W/"2"`, public.ClusterPatch{DisplayName: ptr("Weak")}, http.StatusOK, `"3"`, 0},
		{`*`, public.ClusterPatch{DisplayName: ptr("Any")}, http.StatusOK, `"4"`, 0},
		{``, public.ClusterPatch{Labels: &public.Labels{"env": "prod", "tier": "gold"}}, http.StatusOK, `"5"`, 0},
	}
	for _, s := range steps {
		call := "UpdateCluster(If-Match " + s.ifMatch + ")"
		var params *public.UpdateClusterParams
		if s.ifMatch != "" {
			params = &public.UpdateClusterParams{IfMatch: ptr(s.ifMatch)}
		}
		resp, err := e.client.UpdateClusterWithResponse(ctx, c.Id, params, s.patch, bearer(tok))
		if err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		if s.status != http.StatusOK {
			wantError(t, call, e.apiEnv, resp.JSON412, resp.StatusCode(), s.status, s.code)
			continue
		}
		if resp.JSON200 == nil || resp.HTTPResponse.Header.Get("ETag") != s.wantETag {
			t.Fatalf("%s = %s, ETag %q; want 200 with ETag %s", call, outcome(resp, err), resp.HTTPResponse.Header.Get("ETag"), s.wantETag)
		}
	}
	got, err := e.client.GetClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil || got.JSON200 == nil {
		t.Fatalf("GetCluster(%s) = %s", c.Id, outcome(got, err))
	}
	if g := got.JSON200; g.DisplayName != "Any" || !maps.Equal(g.Labels, public.Labels{"env": "prod", "tier": "gold"}) ||
		g.Generation != 5 || got.HTTPResponse.Header.Get("ETag") != `"5"` || g.Name != "patch-me" {
		t.Errorf("GetCluster(%s) after the patches = %q %v generation %d, want \"Any\" map[env:prod tier:gold] generation 5", c.Id, g.DisplayName, g.Labels, g.Generation)
	}
	missing, err := e.client.UpdateClusterWithResponse(ctx, "no-such-cluster", nil, public.ClusterPatch{DisplayName: ptr("x")}, bearer(tok))
	if err != nil {
		t.Fatalf("UpdateCluster(no-such-cluster): %v", err)
	}
	wantError(t, "UpdateCluster(no-such-cluster)", e.apiEnv, missing.JSON404, missing.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
}

func testClusterIdempotency(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-idem", "alice")
	body := public.ClusterCreate{Name: "idem", Zone: ptr("eu"), Product: public.OCP, Labels: &public.Labels{"env": "prod"}}
	key := &public.CreateClusterParams{IdempotencyKey: ptr("key-0001")}
	first, err := e.client.CreateClusterWithResponse(ctx, key, body, bearer(tok))
	if err != nil || first.JSON202 == nil {
		t.Fatalf("CreateCluster(idem, key-0001) = %s; want 202", outcome(first, err))
	}
	again, err := e.client.CreateClusterWithResponse(ctx, key, body, bearer(tok))
	if err != nil || again.JSON202 == nil {
		t.Fatalf("CreateCluster(idem, key-0001) again = %s; want 202", outcome(again, err))
	}
	if again.JSON202.Id != first.JSON202.Id || again.HTTPResponse.Header.Get("Idempotency-Replayed") != "true" {
		t.Errorf("CreateCluster(idem, key-0001) again = id %s, Idempotency-Replayed %q; want id %s, true",
			again.JSON202.Id, again.HTTPResponse.Header.Get("Idempotency-Replayed"), first.JSON202.Id)
	}
	if n := clusterTotal(t, e, tok, ""); n != 1 {
		t.Errorf("ListClusters() after a replayed create: total = %d, want 1", n)
	}
	changed := body
	changed.DisplayName = ptr("another request")
	reused, err := e.client.CreateClusterWithResponse(ctx, key, changed, bearer(tok))
	if err != nil {
		t.Fatalf("CreateCluster(changed body, key-0001): %v", err)
	}
	wantError(t, "CreateCluster(changed body, key-0001)", e.apiEnv, reused.JSON409, reused.StatusCode(), http.StatusConflict, fleet.CodeIdempotencyKeyReused)
	newKey, err := e.client.CreateClusterWithResponse(ctx, &public.CreateClusterParams{IdempotencyKey: ptr("key-0002")}, body, bearer(tok))
	if err != nil {
		t.Fatalf("CreateCluster(idem, key-0002): %v", err)
	}
	wantError(t, "CreateCluster(idem, key-0002)", e.apiEnv, newKey.JSON409, newKey.StatusCode(), http.StatusConflict, fleet.CodeNameTaken)
	// Keys belong to an organisation: another one's same key is a new request.
	other, err := e.client.CreateClusterWithResponse(ctx, key, body, bearer(e.userToken(t, "org-idem-2", "bob")))
	if err != nil || other.JSON202 == nil || other.JSON202.Id == first.JSON202.Id || other.HTTPResponse.Header.Get("Idempotency-Replayed") != "" {
		t.Errorf("CreateCluster(idem, key-0001) in another org = %s; want 202 with a new id, not replayed", outcome(other, err))
	}
	if n := clusterTotal(t, e, tok, ""); n != 1 {
		t.Errorf("ListClusters() after the refused creates: total = %d, want 1", n)
	}
}

func testClusterNameTaken(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-taken", "alice")
	body := public.ClusterCreate{Name: "taken", Zone: ptr("eu"), Product: public.OCP}
	e.createCluster(t, tok, body)
	resp, err := e.client.CreateClusterWithResponse(ctx, nil, body, bearer(e.userToken(t, "org-taken", "bob")))
	if err != nil {
		t.Fatalf("CreateCluster(taken) again: %v", err)
	}
	wantError(t, "CreateCluster(taken) again", e.apiEnv, resp.JSON409, resp.StatusCode(), http.StatusConflict, fleet.CodeNameTaken)
	e.createCluster(t, e.userToken(t, "org-taken-2", "carol"), body)
}

func testClusterValidation(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-invalid", "alice")
	cases := []struct {
		name, body, reason string
	}{
		{"bad name", `{"name":"Bad_Name","product":"OCP","zone":"eu"}`, "name"},
		{"missing name", `{"product":"OCP","zone":"eu"}`, "name"},
		{"unknown product", `{"name":"ok","product":"Windows","zone":"eu"}`, "product"},
		{"unknown field", `{"name":"ok","product":"OCP","zone":"eu","colour":"red"}`, "not allowed here; the properties are [credentials display_name labels name product region zone]"},
		{"label key", `{"name":"ok","product":"OCP","zone":"eu","labels":{"bad key!":"x"}}`, "label key"},
		{"label prefix", `{"name":"ok","product":"OCP","zone":"eu","labels":{"Not_DNS/env":"x"}}`, "label key"},
		{"label value", `{"name":"ok","product":"OCP","zone":"eu","labels":{"env":"not ok!"}}`, "value"},
		{"both credentials", `{"name":"ok","product":"OCP","zone":"eu","credentials":{"kubeconfig":"k","api_url":"https://a","token":"t"}}`, "credentials"},
		{"token without url", `{"name":"ok","product":"OCP","zone":"eu","credentials":{"token":"t"}}`, "credentials"},
		{"plain http url", `{"name":"ok","product":"OCP","zone":"eu","credentials":{"api_url":"http://a","token":"t"}}`, "https"},
		{"credentials field", `{"name":"ok","product":"OCP","zone":"eu","credentials":{"password":"p"}}`, "credentials: a property is not allowed here; the properties are [api_url kubeconfig token]"},
		{"no zone", `{"name":"ok","product":"OCP"}`, "zone"},
		{"bad zone", `{"name":"ok","product":"OCP","zone":"EU!"}`, "zone"},
		{"long display name", `{"name":"ok","product":"OCP","zone":"eu","display_name":"` + strings.Repeat("x", 257) + `"}`, "display_name"},
	}
	for _, tc := range cases {
		resp, err := e.client.CreateClusterWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(tc.body), bearer(tok))
		if err != nil {
			t.Fatalf("CreateCluster(%s): %v", tc.name, err)
		}
		wantError(t, "CreateCluster("+tc.name+")", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
		if resp.JSON400 != nil && !strings.Contains(resp.JSON400.Reason, tc.reason) {
			t.Errorf("CreateCluster(%s): reason = %q, want it to name %s", tc.name, resp.JSON400.Reason, tc.reason)
		}
	}
	gomega.NewWithT(t).Expect(clusterTotal(t, e, tok, "")).To(gomega.Equal(0), "ListClusters() total after refused creates")
}

// testClusterDelete deregisters a cluster: accepted at once, repeatable, no
// longer changeable, and gone once deleting_mgr has taken it off.
func testClusterDelete(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-delete", "alice")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "delete-me", Zone: ptr("nowhere"), Product: public.OCP})
	first, err := e.client.DeleteClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil || first.JSON202 == nil || first.JSON202.Phase != public.Deprovisioning || first.JSON202.DeletionRequestedAt == nil {
		t.Fatalf("DeleteCluster(%s) = %s; want 202, phase deprovisioning, deletion_requested_at set", c.Id, outcome(first, err))
	}
	again, err := e.client.DeleteClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil || again.JSON202 == nil || again.JSON202.Phase != public.Deprovisioning ||
		again.JSON202.DeletionRequestedAt == nil || !again.JSON202.DeletionRequestedAt.Equal(*first.JSON202.DeletionRequestedAt) {
		t.Errorf("DeleteCluster(%s) again = %s; want 202 with the first deletion_requested_at", c.Id, outcome(again, err))
	}
	for _, ifMatch := range []*string{nil, ptr(`"1"`)} {
		resp, err := e.client.UpdateClusterWithResponse(ctx, c.Id, &public.UpdateClusterParams{IfMatch: ifMatch},
			public.ClusterPatch{DisplayName: ptr("too late")}, bearer(tok))
		if err != nil {
			t.Fatalf("UpdateCluster(%s) after DeleteCluster: %v", c.Id, err)
		}
		wantError(t, "UpdateCluster() after DeleteCluster", e.apiEnv, resp.JSON409, resp.StatusCode(), http.StatusConflict, fleet.CodeConflict)
	}
	e.startReconcilers(t)
	e.eventuallyGone(t, tok, c.Id)
	gone, err := e.client.GetClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil {
		t.Fatalf("GetCluster(%s): %v", c.Id, err)
	}
	wantError(t, "GetCluster(gone)", e.apiEnv, gone.JSON404, gone.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	del, err := e.client.DeleteClusterWithResponse(ctx, c.Id, bearer(tok))
	if err != nil {
		t.Fatalf("DeleteCluster(%s) when gone: %v", c.Id, err)
	}
	wantError(t, "DeleteCluster(gone)", e.apiEnv, del.JSON404, del.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	if n := clusterTotal(t, e, tok, ""); n != 0 {
		t.Errorf("ListClusters() after deregistration: total = %d, want 0", n)
	}
	e.createCluster(t, tok, public.ClusterCreate{Name: "delete-me", Zone: ptr("nowhere"), Product: public.OCP})
}
