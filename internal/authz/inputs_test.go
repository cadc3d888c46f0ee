package authz_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestPolicyFileReadsLiveRegistrations loads policy files that read the
// organisation's live registrations in every way Rego allows, and some that
// cannot: ReadsLiveRegistrations must say so from the syntax tree, not from
// the text (a comment naming the field reads nothing).
func TestPolicyFileReadsLiveRegistrations(t *testing.T) {
	t.Parallel()
	const head = "package fleet.authz\n\n"
	const allow = `decision := {"allow": true, "code": 0, "reason": "ok"}` + "\n"
	tests := []struct {
		name  string
		rules string
		want  bool
	}{
		{"literal fields only", allow + `x if input.subject.org_id == "a"` + "\n", false},
		{"the field named in a comment only", "# input.live_registrations is not read\n" + allow, false},
		{"the field named in a string of another field", allow + `x if input.product == "live_registrations_x"` + "\n", false},
		{"a quota rule", `decision := {"allow": input.live_registrations < 10, "code": 15, "reason": "quota"}` + "\n", true},
		{"the field in brackets", allow + `x if input["live_registrations"] > 1` + "\n", true},
		{"object.get with the field's name", allow + `x if object.get(input, "live_registrations", 0) > 1` + "\n", true},
		{"a variable key", allow + `x if { some k; input[k] == 3 }` + "\n", true},
		{"input as a whole", allow + `x := input` + "\n", true},
		{"input imported under another name", "import input as req\n\n" + allow + `x if req.subject.org_id == "a"` + "\n", true},
		{"the field imported", "import input.live_registrations as live\n\n" + allow + `x if live > 1` + "\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "fork.rego")
			if err := os.WriteFile(path, []byte(head+tt.rules), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := authz.DefaultConfig()
			cfg.PolicyFile = path
			if got := newAuthorizer(t, cfg).ReadsLiveRegistrations(); got != tt.want {
				t.Errorf("ReadsLiveRegistrations() of a policy with %s = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

// TestDefaultPolicyReadsLiveRegistrationsForAQuotaOnly checks the embedded
// policy's answer against its decisions: without a quota, no count changes a
// create's decision, for any subject the pre-flight rules tell apart; with
// one, ReadsLiveRegistrations is true and the count decides.
func TestDefaultPolicyReadsLiveRegistrationsForAQuotaOnly(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	subjects := []fleet.Subject{
		{Kind: fleet.SubjectUser, Username: "alice", OrgID: "org-a", OrgRole: fleet.OrgRoleAdmin},
		{Kind: fleet.SubjectUser, Username: "bob", OrgID: "org-b", OrgRole: fleet.OrgRoleMember},
		{Kind: fleet.SubjectUser, Username: "vic", OrgID: "org-a", OrgRole: fleet.OrgRoleViewer},
		{Kind: fleet.SubjectUser, Username: "drifter", OrgRole: fleet.OrgRoleNone},
	}
	for _, change := range []func(*fleet.Preflight){
		nil,
		func(p *fleet.Preflight) { p.DeniedOrgs = []string{"org-b"} },
		func(p *fleet.Preflight) { p.AcceptedProducts = []fleet.Product{fleet.ProductOCP} },
	} {
		cfg := authz.DefaultConfig()
		if change != nil {
			change(&cfg.Preflight)
		}
		a := newAuthorizer(t, cfg)
		g.Expect(a.ReadsLiveRegistrations()).To(gomega.BeFalse(), "the default policy without a quota")
		for _, s := range subjects {
			for _, product := range []string{string(fleet.ProductOCP), string(fleet.ProductROSA)} {
				req := fleet.AuthzRequest{Subject: s, Action: fleet.ActionClustersCreate, Product: product,
					Resource: fleet.AuthzResource{Kind: "cluster", OrgID: s.OrgID}}
				none := codeOf(a.Authorize(ctx, req))
				for _, live := range []int{1, 1_000_000} {
					req.LiveRegistrations = live
					g.Expect(codeOf(a.Authorize(ctx, req))).To(gomega.Equal(none), "%s creating %s with %d live registrations", s.Username, product, live)
				}
			}
		}
	}
	cfg := authz.DefaultConfig()
	cfg.Preflight.MaxRegistrationsPerOrg = 3
	a := newAuthorizer(t, cfg)
	g.Expect(a.ReadsLiveRegistrations()).To(gomega.BeTrue(), "the default policy with a quota")
	req := fleet.AuthzRequest{Subject: subjects[0], Action: fleet.ActionClustersCreate, Product: string(fleet.ProductOCP),
		Resource: fleet.AuthzResource{Kind: "cluster", OrgID: "org-a"}, LiveRegistrations: 3}
	g.Expect(codeOf(a.Authorize(ctx, req))).To(gomega.Equal(fleet.CodeQuotaExceeded))
}
