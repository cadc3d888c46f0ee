package fleet_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestZonesServesAndRedirect(t *testing.T) {
	t.Parallel()
	all := fleet.Zones{}
	eu := fleet.Zones{Served: []string{"eu", "eu-2"}, Deployments: map[string]string{
		"us": "https://fleet.us.example.com/api/fleet_manager/v1", "eu": "https://fleet.eu.example.com/api/fleet_manager/v1", "ap": ""}}
	tests := []struct {
		name       string
		z          fleet.Zones
		zone       string
		serves     bool
		redirect   string
		redirected bool
	}{
		{"no zones configured serve every zone", all, "us", true, "", false},
		{"a served zone", eu, "eu", true, "", false},
		{"the second served zone", eu, "eu-2", true, "", false},
		{"a zone served elsewhere", eu, "us", false, "https://fleet.us.example.com/api/fleet_manager/v1", true},
		{"a zone nobody is known to serve", eu, "sa", false, "", false},
		{"an empty URL is no deployment", eu, "ap", false, "", false},
		{"a served zone is never redirected, even when mapped", eu, "eu", true, "", false},
	}
	for _, tc := range tests {
		if got := tc.z.Serves(tc.zone); got != tc.serves {
			t.Errorf("%s: Serves(%q) = %v, want %v", tc.name, tc.zone, got, tc.serves)
		}
		url, ok := tc.z.Redirect(tc.zone)
		if url != tc.redirect || ok != tc.redirected {
			t.Errorf("%s: Redirect(%q) = %q, %v; want %q, %v", tc.name, tc.zone, url, ok, tc.redirect, tc.redirected)
		}
	}
}

func TestZonesCheck(t *testing.T) {
	t.Parallel()
	z := fleet.Zones{Served: []string{"eu"}, Deployments: map[string]string{"us": "https://fleet.us.example.com/api/fleet_manager/v1"}}
	tests := []struct {
		name        string
		z           fleet.Zones
		kind, zone  string
		want        fleet.ErrorCode
		wantReason  []string
		wantDetails map[string]string
	}{
		{"every zone served", fleet.Zones{}, "cluster", "us", 0, nil, nil},
		{"served", z, "cluster", "eu", 0, nil, nil},
		{"served elsewhere", z, "cluster", "us", fleet.CodeZoneNotServed,
			[]string{"does not serve zone us", "[eu]", "create the cluster at the deployment serving zone us: https://fleet.us.example.com/api/fleet_manager/v1"},
			map[string]string{fleet.DetailZone: "us", fleet.DetailDeploymentURL: "https://fleet.us.example.com/api/fleet_manager/v1"}},
		{"no deployment known", z, "hub", "sa", fleet.CodeZoneNotServed,
			[]string{"does not serve zone sa", "knows no deployment that does", "a hub in zone sa cannot be created here"},
			map[string]string{fleet.DetailZone: "sa"}},
	}
	for _, tc := range tests {
		err := tc.z.Check(tc.kind, tc.zone)
		if got := fleetCode(err); got != tc.want {
			t.Errorf("%s: Check(%q, %q) = %v, want code %d", tc.name, tc.kind, tc.zone, err, tc.want)
			continue
		}
		for _, w := range tc.wantReason {
			if !strings.Contains(fleet.ErrorMessageOf(err), w) {
				t.Errorf("%s: Check(%q, %q) = %q, want it to contain %q", tc.name, tc.kind, tc.zone, err, w)
			}
		}
		if got := fleet.ErrorDetailsOf(err); !maps.Equal(got, tc.wantDetails) {
			t.Errorf("%s: ErrorDetailsOf(Check(%q, %q)) = %v, want %v", tc.name, tc.kind, tc.zone, got, tc.wantDetails)
		}
	}
}
