package rest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetmanager/fleet-manager/internal/auth"
)

func TestMetricsByRouteTemplate(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		e := newAPIEnv(t, f)
		ctx := context.Background()
		for _, id := range []string{"4", "5", "999"} {
			if _, err := e.client.GetErrorWithResponse(ctx, id); err != nil {
				t.Fatalf("GetError(%s): %v", id, err)
			}
		}
		tok := e.token(t, auth.TokenRequest{OrgID: "o", Username: "u"})
		if _, err := e.client.GetCurrentUserWithResponse(ctx, bearer(tok)); err != nil {
			t.Fatalf("GetCurrentUser(): %v", err)
		}
		ns := strings.ReplaceAll(f.http.ServiceName, "-", "_")
		want := `
# HELP ` + ns + `_api_inbound_requests_total API requests by route template, method and status code.
# TYPE ` + ns + `_api_inbound_requests_total counter
` + ns + `_api_inbound_requests_total{code="200",method="GET",route="` + f.http.BasePath + `/current_user"} 1
` + ns + `_api_inbound_requests_total{code="200",method="GET",route="` + f.http.BasePath + `/errors/{id}"} 2
` + ns + `_api_inbound_requests_total{code="404",method="GET",route="` + f.http.BasePath + `/errors/{id}"} 1
`
		if err := testutil.GatherAndCompare(e.registry, strings.NewReader(want), ns+"_api_inbound_requests_total"); err != nil {
			t.Errorf("%s: request counter: %v", f.name, err)
		}
		if n := testutil.CollectAndCount(e.registry, ns+"_api_inbound_request_duration_seconds"); n != 3 {
			t.Errorf("%s: duration series = %d, want 3 (one per route, method and code)", f.name, n)
		}
	}
}
