package fleet_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// fleetCode returns the error code of err, 0 for nil.
func fleetCode(err error) fleet.ErrorCode {
	if err == nil {
		return 0
	}
	return fleet.ErrorCodeOf(err)
}

func TestPreflightCheckCaller(t *testing.T) {
	t.Parallel()
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	bob := fleet.Identity{OrgID: "org-b", Username: "bob"}
	tests := []struct {
		name   string
		p      fleet.Preflight
		caller fleet.Identity
		want   fleet.ErrorCode
	}{
		{"empty lists allow everyone", fleet.Preflight{}, alice, 0},
		{"token without org", fleet.Preflight{}, fleet.Identity{Username: "alice"}, fleet.CodeOrgNotAllowed},
		{"token without org, org allowed empty list", fleet.Preflight{AllowedOrgs: []string{""}}, fleet.Identity{Username: "alice"}, fleet.CodeOrgNotAllowed},
		{"org on the allow list", fleet.Preflight{AllowedOrgs: []string{"org-a", "org-c"}}, alice, 0},
		{"org off the allow list", fleet.Preflight{AllowedOrgs: []string{"org-a", "org-c"}}, bob, fleet.CodeOrgNotAllowed},
		{"org on the deny list", fleet.Preflight{DeniedOrgs: []string{"org-b"}}, bob, fleet.CodeOrgNotAllowed},
		{"org off the deny list", fleet.Preflight{DeniedOrgs: []string{"org-b"}}, alice, 0},
		{"deny wins over allow for orgs", fleet.Preflight{AllowedOrgs: []string{"org-a"}, DeniedOrgs: []string{"org-a"}}, alice, fleet.CodeOrgNotAllowed},
		{"user on the allow list", fleet.Preflight{AllowedUsers: []string{"alice"}}, alice, 0},
		{"user off the allow list", fleet.Preflight{AllowedUsers: []string{"alice"}}, bob, fleet.CodeUserNotAllowed},
		{"user on the deny list", fleet.Preflight{DeniedUsers: []string{"bob"}}, bob, fleet.CodeUserNotAllowed},
		{"user off the deny list", fleet.Preflight{DeniedUsers: []string{"bob"}}, alice, 0},
		{"deny wins over allow for users", fleet.Preflight{AllowedUsers: []string{"alice"}, DeniedUsers: []string{"alice"}}, alice, fleet.CodeUserNotAllowed},
		{"org refusal comes first", fleet.Preflight{DeniedOrgs: []string{"org-b"}, DeniedUsers: []string{"bob"}}, bob, fleet.CodeOrgNotAllowed},
		{"allowed org, denied user", fleet.Preflight{AllowedOrgs: []string{"org-b"}, DeniedUsers: []string{"bob"}}, bob, fleet.CodeUserNotAllowed},
		{"lists match exactly, not by prefix", fleet.Preflight{AllowedOrgs: []string{"org"}}, alice, fleet.CodeOrgNotAllowed},
	}
	for _, tc := range tests {
		if got := fleetCode(tc.p.CheckCaller(tc.caller)); got != tc.want {
			t.Errorf("%s: %+v.CheckCaller(%+v) code = %d, want %d", tc.name, tc.p, tc.caller, got, tc.want)
		}
	}
}

func TestPreflightCheckProduct(t *testing.T) {
	t.Parallel()
	tests := []struct {
		accepted []fleet.Product
		product  fleet.Product
		want     fleet.ErrorCode
	}{
		{nil, fleet.ProductOCP, 0},
		{nil, fleet.ProductKubernetes, 0},
		{[]fleet.Product{fleet.ProductOCP, fleet.ProductROSA}, fleet.ProductROSA, 0},
		{[]fleet.Product{fleet.ProductOCP, fleet.ProductROSA}, fleet.ProductEKS, fleet.CodeProductNotAccepted},
		{[]fleet.Product{fleet.ProductOCP}, "ocp", fleet.CodeProductNotAccepted},
		{fleet.Products(), fleet.ProductGKE, 0},
	}
	for _, tc := range tests {
		p := fleet.Preflight{AcceptedProducts: tc.accepted}
		if got := fleetCode(p.CheckProduct(tc.product)); got != tc.want {
			t.Errorf("Preflight{AcceptedProducts: %v}.CheckProduct(%s) code = %d, want %d", tc.accepted, tc.product, got, tc.want)
		}
	}
}

func TestPreflightCheckQuota(t *testing.T) {
	t.Parallel()
	tests := []struct {
		max  int
		live int
		want fleet.ErrorCode
	}{
		{0, 0, 0},
		{0, 1_000_000, 0},
		{1, 0, 0},
		{1, 1, fleet.CodeQuotaExceeded},
		{5, 4, 0},
		{5, 5, fleet.CodeQuotaExceeded},
		{5, 6, fleet.CodeQuotaExceeded},
	}
	for _, tc := range tests {
		p := fleet.Preflight{MaxRegistrationsPerOrg: tc.max}
		if got := fleetCode(p.CheckQuota("org-a", tc.live)); got != tc.want {
			t.Errorf("Preflight{Max: %d}.CheckQuota(org-a, %d) code = %d, want %d", tc.max, tc.live, got, tc.want)
		}
	}
}
