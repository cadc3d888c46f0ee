package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestUserMetricsWithoutBackend checks the user-facing metrics endpoints of a
// deployment without a metrics backend: the text endpoints serve the
// organisation's own inventory series, another organisation's cluster is not
// found, and the query endpoints say there is no backend.
// internal/e2e/usermetrics_test.go runs them against a real Prometheus.
func TestUserMetricsWithoutBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newStackEnv(t, flavours()[0])
	tokA, tokB := e.userToken(t, "org-a", "alice"), e.userToken(t, "org-b", "bob")
	a := e.createCluster(t, tokA, public.ClusterCreate{Name: "metrics-a", Zone: ptr("eu"), Product: public.OCP})
	e.createCluster(t, tokB, public.ClusterCreate{Name: "metrics-b", Zone: ptr("eu"), Product: public.OCP})

	text, err := e.client.GetMetricsTextWithResponse(ctx, bearer(tokA))
	if err != nil || text.StatusCode() != http.StatusOK {
		t.Fatalf("GetMetricsText as org-a = %s", outcome(text, err))
	}
	if ct := text.HTTPResponse.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("GetMetricsText Content-Type = %q, want the Prometheus text format", ct)
	}
	body := string(text.Body)
	if !strings.Contains(body, `fleet_manager_registrations{org_id="org-a",phase=`) || strings.Contains(body, "org-b") {
		t.Errorf("GetMetricsText as org-a = %q; want org-a's registrations only", body)
	}

	one, err := e.client.GetClusterMetricsTextWithResponse(ctx, a.Id, bearer(tokA))
	if err != nil || one.StatusCode() != http.StatusOK {
		t.Errorf("GetClusterMetricsText(org-a's) as org-a = %s", outcome(one, err))
	}
	stolen, err := e.client.GetClusterMetricsTextWithResponse(ctx, a.Id, bearer(tokB))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "GetClusterMetricsText(org-a's) as org-b", e.apiEnv, stolen.JSON404, stolen.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	if strings.Contains(string(stolen.Body), a.Id) {
		t.Errorf("GetClusterMetricsText as org-b echoes the id: %s", stolen.Body)
	}

	q, err := e.client.QueryMetricsWithResponse(ctx, &public.QueryMetricsParams{Query: "up"}, bearer(tokA))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "QueryMetrics without a backend", e.apiEnv, q.JSON404, q.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	// A form body, as Prometheus clients send, passes validation to the same answer.
	form, err := e.client.QueryMetricsFormWithBodyWithResponse(ctx, &public.QueryMetricsFormParams{},
		"application/x-www-form-urlencoded", strings.NewReader("query=sum%28up%29&time=1700000000"), bearer(tokA))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "QueryMetricsForm without a backend", e.apiEnv, form.JSON404, form.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	empty, err := e.client.QueryMetricsFormWithBodyWithResponse(ctx, &public.QueryMetricsFormParams{},
		"application/x-www-form-urlencoded", strings.NewReader("time=1700000000"), bearer(tokA))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "QueryMetricsForm without a query", e.apiEnv, empty.JSON400, empty.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
}
