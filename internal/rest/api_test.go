package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// wantError checks an error body against the catalogue code it should carry.
func wantError(t *testing.T, call string, e *apiEnv, got *public.Error, status, wantStatus int, code fleet.ErrorCode) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status = %d, want %d", call, status, wantStatus)
	}
	if got == nil {
		t.Errorf("%s: no error body", call)
		return
	}
	wantCode := fmt.Sprintf("%s-%d", e.http.ErrorCodePrefix, code)
	wantHref := fmt.Sprintf("%s/errors/%d", e.http.BasePath, code)
	if got.Kind != public.ErrorKindError || got.Code != wantCode || got.Href != wantHref || got.Id != fmt.Sprint(code) {
		t.Errorf("%s: error = {kind %s, code %s, href %s, id %s}, want {Error, %s, %s, %d}",
			call, got.Kind, got.Code, got.Href, got.Id, wantCode, wantHref, code)
	}
	if got.OperationId == nil || *got.OperationId == "" {
		t.Errorf("%s: error has no operation_id", call)
	}
}

func TestAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newAPIEnv(t, f)
			t.Run("openapi", func(t *testing.T) { testOpenAPI(t, e) })
			t.Run("errors", func(t *testing.T) { testErrorCatalogue(t, e) })
			t.Run("validation", func(t *testing.T) { testRequestValidation(t, e) })
			t.Run("current_user", func(t *testing.T) { testCurrentUser(t, e) })
			t.Run("unauthenticated", func(t *testing.T) { testUnauthenticated(t, e) })
			t.Run("routing", func(t *testing.T) { testRouting(t, e) })
			t.Run("operation_id", func(t *testing.T) { testOperationID(t, e) })
		})
	}
}

func testOpenAPI(t *testing.T, e *apiEnv) {
	ctx := context.Background()
	resp, err := e.client.GetOpenAPIWithResponse(ctx)
	if err != nil || resp.StatusCode() != http.StatusOK {
		t.Fatalf("GetOpenAPI() = %v, %v; want 200", resp.StatusCode(), err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		t.Fatalf("GetOpenAPI(): body is not JSON: %v", err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != e.http.BasePath {
		t.Errorf("GetOpenAPI().servers = %+v, want the one base path %s", doc.Servers, e.http.BasePath)
	}
	if _, ok := doc.Paths["/current_user"]; !ok || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("GetOpenAPI() = openapi %q with paths %v; want 3.x with /current_user", doc.OpenAPI, doc.Paths)
	}
}

func testErrorCatalogue(t *testing.T, e *apiEnv) {
	ctx := context.Background()
	list, err := e.client.ListErrorsWithResponse(ctx, nil)
	if err != nil || list.JSON200 == nil {
		t.Fatalf("ListErrors() = %v, %v", list.StatusCode(), err)
	}
	catalogue := fleet.Catalogue()
	if list.JSON200.Total != len(catalogue) || len(list.JSON200.Items) != len(catalogue) {
		t.Errorf("ListErrors(): total %d, items %d; want %d", list.JSON200.Total, len(list.JSON200.Items), len(catalogue))
	}
	for i, item := range list.JSON200.Items {
		want := fmt.Sprintf("%s-%d", e.http.ErrorCodePrefix, catalogue[i].Code)
		if item.Code != want || item.Reason != catalogue[i].Reason {
			t.Errorf("ListErrors().items[%d] = %s %q, want %s %q", i, item.Code, item.Reason, want, catalogue[i].Reason)
		}
	}
	page2, err := e.client.ListErrorsWithResponse(ctx, &public.ListErrorsParams{Page: ptr(2), Size: ptr(5)})
	if err != nil || page2.JSON200 == nil || page2.JSON200.Page != 2 || page2.JSON200.Size != 5 ||
		page2.JSON200.Items[0].Id != fmt.Sprint(catalogue[5].Code) {
		t.Errorf("ListErrors(page 2, size 5) = %s, %v; want items from the sixth", page2.Body, err)
	}
	one, err := e.client.GetErrorWithResponse(ctx, "4")
	if err != nil || one.JSON200 == nil || one.JSON200.Code != e.http.ErrorCodePrefix+"-4" {
		t.Errorf("GetError(4) = %s, %v", one.Body, err)
	}
	missing, err := e.client.GetErrorWithResponse(ctx, "999")
	if err != nil {
		t.Fatalf("GetError(999): %v", err)
	}
	wantError(t, "GetError(999)", e, missing.JSON404, missing.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
}

func testRequestValidation(t *testing.T, e *apiEnv) {
	ctx := context.Background()
	cases := []struct {
		call   string
		do     func() (*public.ListErrorsResponse, error)
		reason string
	}{
		{"ListErrors(page=0)", func() (*public.ListErrorsResponse, error) {
			return e.client.ListErrorsWithResponse(ctx, &public.ListErrorsParams{Page: ptr(0)})
		}, `parameter "page"`},
		{"ListErrors(size=5000)", func() (*public.ListErrorsResponse, error) {
			return e.client.ListErrorsWithResponse(ctx, &public.ListErrorsParams{Size: ptr(5000)})
		}, `parameter "size"`},
		{"ListErrors(size=abc)", func() (*public.ListErrorsResponse, error) {
			return e.client.ListErrorsWithResponse(ctx, nil, func(_ context.Context, r *http.Request) error {
				r.URL.RawQuery = "size=abc"
				return nil
			})
		}, `parameter "size"`},
	}
	for _, tc := range cases {
		resp, err := tc.do()
		if err != nil {
			t.Fatalf("%s: %v", tc.call, err)
		}
		wantError(t, tc.call, e, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
		if resp.JSON400 != nil && !strings.Contains(resp.JSON400.Reason, tc.reason) {
			t.Errorf("%s: reason = %q, want it to name %s", tc.call, resp.JSON400.Reason, tc.reason)
		}
	}
	bad, err := e.client.GetErrorWithResponse(ctx, "abc")
	if err != nil {
		t.Fatalf("GetError(abc): %v", err)
	}
	wantError(t, "GetError(abc)", e, bad.JSON400, bad.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
}

func testCurrentUser(t *testing.T, e *apiEnv) {
	ctx := context.Background()
	cases := []struct {
		req  auth.TokenRequest
		want public.CurrentUser
	}{
		{auth.TokenRequest{OrgID: "org-1", Username: "alice", Roles: []string{"fleet-admin", "viewer"}},
			public.CurrentUser{OrgId: "org-1", Username: "alice", Roles: []string{"fleet-admin", "viewer"}}},
		{auth.TokenRequest{OrgID: "org-2", Username: "bob"},
			public.CurrentUser{OrgId: "org-2", Username: "bob", Roles: []string{}}},
		{auth.TokenRequest{AgentID: "hub-eu-1-agent"},
			public.CurrentUser{Roles: []string{}, AgentId: ptr("hub-eu-1-agent")}},
	}
	for _, tc := range cases {
		resp, err := e.client.GetCurrentUserWithResponse(ctx, bearer(e.token(t, tc.req)))
		if err != nil || resp.JSON200 == nil {
			t.Errorf("GetCurrentUser(%+v) = %d %s, %v", tc.req, resp.StatusCode(), resp.Body, err)
			continue
		}
		got := resp.JSON200
		if got.OrgId != tc.want.OrgId || got.Username != tc.want.Username || fmt.Sprint(got.Roles) != fmt.Sprint(tc.want.Roles) ||
			deref(got.AgentId) != deref(tc.want.AgentId) || deref(got.Issuer) != testIssuer {
			t.Errorf("GetCurrentUser(%+v) = %+v, want %+v from issuer %s", tc.req, got, tc.want, testIssuer)
		}
	}
}

func testUnauthenticated(t *testing.T, e *apiEnv) {
	ctx := context.Background()
	expired, err := e.key.Mint(e.auth, auth.TokenRequest{OrgID: "o", Username: "u", TTL: time.Hour,
		Issuer: testIssuer, Audience: testAudience}, time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatalf("Mint(): %v", err)
	}
	cases := []struct {
		name   string
		editor public.RequestEditorFn
	}{
		{"no token", func(context.Context, *http.Request) error { return nil }},
		{"garbage", bearer("not-a-jwt")},
		{"basic scheme", header("Authorization", "Basic dXNlcjpwYXNz")},
		{"empty bearer", header("Authorization", "Bearer ")},
		{"expired", bearer(expired)},
	}
	for _, tc := range cases {
		resp, err := e.client.GetCurrentUserWithResponse(ctx, tc.editor)
		if err != nil {
			t.Fatalf("GetCurrentUser(%s): %v", tc.name, err)
		}
		wantError(t, "GetCurrentUser("+tc.name+")", e, resp.JSON401, resp.StatusCode(), http.StatusUnauthorized, fleet.CodeUnauthenticated)
		if !strings.HasPrefix(resp.HTTPResponse.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("GetCurrentUser(%s): WWW-Authenticate = %q, want Bearer", tc.name, resp.HTTPResponse.Header.Get("WWW-Authenticate"))
		}
	}
	if strings.Contains(e.logs.String(), expired) {
		t.Errorf("the log contains a token")
	}
}

func testRouting(t *testing.T, e *apiEnv) {
	cases := []struct {
		method, path string
		status       int
		code         fleet.ErrorCode
	}{
		{http.MethodGet, e.http.BasePath + "/no_such_thing", http.StatusNotFound, fleet.CodeNotFound},
		{http.MethodGet, "/api/somebody_else/v1/current_user", http.StatusNotFound, fleet.CodeNotFound},
		{http.MethodDelete, e.http.BasePath + "/current_user", http.StatusMethodNotAllowed, fleet.CodeMethodNotAllowed},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, e.server.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		var body public.Error
		_ = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		wantError(t, tc.method+" "+tc.path, e, &body, resp.StatusCode, tc.status, tc.code)
	}
}

func testOperationID(t *testing.T, e *apiEnv) {
	ctx := context.Background()
	resp, err := e.client.GetCurrentUserWithResponse(ctx)
	if err != nil || resp.JSON401 == nil {
		t.Fatalf("GetCurrentUser() = %v, %v; want 401", resp.StatusCode(), err)
	}
	headerID := resp.HTTPResponse.Header.Get("X-Operation-ID")
	if headerID == "" || deref(resp.JSON401.OperationId) != headerID {
		t.Errorf("operation id: header %q, body %q; want the same non-empty id", headerID, deref(resp.JSON401.OperationId))
	}
	if !strings.Contains(e.logs.String(), `"operation_id":"`+headerID+`"`) {
		t.Errorf("the request log has no entry with operation_id %s", headerID)
	}
	given, err := e.client.GetCurrentUserWithResponse(ctx, header("X-Operation-ID", "gateway-1234"))
	if err != nil || given.HTTPResponse.Header.Get("X-Operation-ID") != "gateway-1234" {
		t.Errorf("a caller's X-Operation-ID was not kept: %v, %v", given.HTTPResponse.Header, err)
	}
	evil, err := e.client.GetCurrentUserWithResponse(ctx, header("X-Operation-ID", "bad id\twith spaces"))
	if err != nil || evil.HTTPResponse.Header.Get("X-Operation-ID") == "bad id\twith spaces" {
		t.Errorf("an invalid X-Operation-ID was echoed: %v, %v", evil.HTTPResponse.Header, err)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
