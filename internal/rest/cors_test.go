package rest_test

import (
	"net/http"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/rest"
)

func TestCORS(t *testing.T) {
	t.Parallel()
	f := flavours()[0]
	f.http.CORS.AllowedOrigins = []string{"https://console.redhat.com", "https://*.console.example.com"}
	e := newAPIEnv(t, f)
	off := newAPIEnv(t, flavours()[0])
	cases := []struct {
		name, origin string
		env          *apiEnv
		wantOrigin   string
	}{
		{"allowed", "https://console.redhat.com", e, "https://console.redhat.com"},
		{"allowed by wildcard", "https://stage.console.example.com", e, "https://stage.console.example.com"},
		{"refused", "https://evil.example.org", e, ""},
		{"cors off", "https://console.redhat.com", off, ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodOptions, tc.env.base+"/current_user", nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("preflight %s: %v", tc.name, err)
		}
		_ = resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tc.wantOrigin {
			t.Errorf("preflight %s: Access-Control-Allow-Origin = %q, want %q", tc.name, got, tc.wantOrigin)
		}
		if tc.wantOrigin != "" {
			if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Methods") != "GET" ||
				resp.Header.Get("Access-Control-Max-Age") != "600" {
				t.Errorf("preflight %s = %d %v, want 204 allowing GET for 600 s", tc.name, resp.StatusCode, resp.Header)
			}
		}
	}
	// An actual cross-origin request exposes the operation id header.
	req, _ := http.NewRequest(http.MethodGet, e.base+"/errors", nil)
	req.Header.Set("Origin", "https://console.redhat.com")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /errors: %v", err)
	}
	_ = resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Expose-Headers"); got != "Etag, Location, X-Operation-Id" {
		t.Errorf("Access-Control-Expose-Headers = %q, want the configured ones", got)
	}
	_ = rest.OperationIDHeader
}
