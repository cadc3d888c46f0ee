package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestServeZoneSettingsFromFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	opts := defaultServeOptions()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	opts.DB.addFlags(fs)
	opts.Store.AddFlags(fs)
	if err := fs.Parse([]string{"--served-zones=eu,eu-2"}); err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	env := mapEnv(map[string]string{
		"FLEET_MANAGER_SERVED_ZONES":     "ignored",
		"FLEET_MANAGER_ZONE_DEPLOYMENTS": "us=https://fleet.us.example.com/api/fleet_manager/v1,ap=https://fleet.ap.example.com/api/fleet_manager/v1",
	})
	if err := complete(fs, env, &opts.DB.SecretsDir); err != nil {
		t.Fatalf("complete() = %v", err)
	}
	if want := []string{"eu", "eu-2"}; !slices.Equal(opts.Store.Zones.Served, want) {
		t.Errorf("--served-zones = %v, want %v (the flag wins over the environment)", opts.Store.Zones.Served, want)
	}
	want := map[string]string{"us": "https://fleet.us.example.com/api/fleet_manager/v1", "ap": "https://fleet.ap.example.com/api/fleet_manager/v1"}
	if !maps.Equal(opts.Store.Zones.Deployments, want) {
		t.Errorf("FLEET_MANAGER_ZONE_DEPLOYMENTS = %v, want %v", opts.Store.Zones.Deployments, want)
	}
	if err := opts.Store.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestServeValidatesZoneSettings(t *testing.T) {
	t.Parallel()
	_, stderr, err := execute(t, map[string]string{"FLEET_MANAGER_ZONE_DEPLOYMENTS": "us=http://fleet.us.example.com"},
		"serve", "--served-zones=eu", "--registration-default-zone=us")
	if err == nil {
		t.Fatalf("serve with bad zone settings succeeded; stderr: %s", stderr)
	}
	for _, want := range []string{
		`--zone-deployments: zone us: "http://fleet.us.example.com" must be an https URL`,
		`--registration-default-zone: "us" is not one of --served-zones [eu]`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("serve error = %q, want it to contain %q", err, want)
		}
	}
}
