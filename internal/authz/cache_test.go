package authz_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// cachingAuthorizer returns an authorizer of cfg and a function that reads
// how many decisions it answered from its cache.
func cachingAuthorizer(t testing.TB, cfg authz.Config) (*authz.Authorizer, func() float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics, err := authz.NewMetrics("t", reg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics)
	if err != nil {
		t.Fatalf("authz.New(): %v", err)
	}
	return a, func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "t_authz_decisions_cached_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no t_authz_decisions_cached_total")
		return 0
	}
}

// TestDecisionCache: a request asked again gets the decision it got, allow
// or deny, from the cache, and a different request is evaluated; the cache
// forgets everything when full, and is off at size 0.
func TestDecisionCache(t *testing.T) {
	t.Parallel()
	member := fleet.Subject{Kind: fleet.SubjectUser, ID: "m", Username: "m", OrgID: "org-a", OrgRole: fleet.OrgRoleMember}
	own := fleet.AuthzRequest{Subject: member, Action: "clusters:delete", Resource: fleet.AuthzResource{Kind: "cluster", ID: "c1", OrgID: "org-a", CreatedBy: "m"}}
	other := own
	other.Resource.CreatedBy = "someone-else"

	cfg := authz.DefaultConfig()
	cfg.DecisionCacheSize = 2
	a, cached := cachingAuthorizer(t, cfg)
	ask := func(req fleet.AuthzRequest, want fleet.ErrorCode, wantCached float64) {
		t.Helper()
		if got := codeOf(a.Authorize(context.Background(), req)); got != want {
			t.Errorf("Authorize(%s by %s) = %d, want %d", req.Action, req.Resource.CreatedBy, got, want)
		}
		if got := cached(); got != wantCached {
			t.Errorf("after Authorize(%s by %s): %v decisions cached, want %v", req.Action, req.Resource.CreatedBy, got, wantCached)
		}
	}
	ask(own, 0, 0)
	ask(own, 0, 1)
	ask(other, fleet.CodeActionForbidden, 1)
	ask(other, fleet.CodeActionForbidden, 2)
	// A third request fills the cache past its size: it starts again.
	third := own
	third.Resource.ID = "c2"
	ask(third, 0, 2)
	ask(own, 0, 2)
	ask(own, 0, 3)

	cfg.DecisionCacheSize = 0
	off, offCached := cachingAuthorizer(t, cfg)
	for range 3 {
		if err := off.Authorize(context.Background(), own); err != nil {
			t.Fatalf("Authorize() = %v", err)
		}
	}
	if got := offCached(); got != 0 {
		t.Errorf("cache size 0: %v decisions cached, want none", got)
	}
}

// nowPolicy reads the time, so its decisions are never remembered.
const nowPolicy = `package fleet.authz

decision := {"allow": true, "code": 0, "reason": ""} if {
	time.now_ns() > 0
}
`

// TestDecisionCacheSkipsNondeterministicPolicies: a policy that calls a
// nondeterministic built-in is evaluated at every request.
func TestDecisionCacheSkipsNondeterministicPolicies(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "now.rego")
	if err := os.WriteFile(path, []byte(nowPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := authz.DefaultConfig()
	cfg.PolicyFile = path
	a, cached := cachingAuthorizer(t, cfg)
	req := fleet.AuthzRequest{Subject: fleet.Subject{Kind: fleet.SubjectUser, OrgID: "org-a"}, Action: "clusters:list"}
	for range 3 {
		if err := a.Authorize(context.Background(), req); err != nil {
			t.Fatalf("Authorize() = %v", err)
		}
	}
	if got := cached(); got != 0 {
		t.Errorf("a policy reading the time: %v decisions cached, want none", got)
	}
}
