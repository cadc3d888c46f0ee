package postgres_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

func TestStoreConfigValidateZones(t *testing.T) {
	t.Parallel()
	const us = "https://fleet.us.example.com/api/fleet_manager/v1"
	cases := []struct {
		name   string
		mutate func(*postgres.StoreConfig)
		want   []string
	}{
		{"every zone, the default", func(*postgres.StoreConfig) {}, nil},
		{"every zone with a default zone", func(c *postgres.StoreConfig) { c.DefaultZone = "us" }, nil},
		{"served zones and a map", func(c *postgres.StoreConfig) {
			c.Zones = fleet.Zones{Served: []string{"eu"}, Deployments: map[string]string{"us": us}}
			c.DefaultZone = "eu"
		}, nil},
		{"bad zone names", func(c *postgres.StoreConfig) {
			c.Zones = fleet.Zones{Served: []string{"EU"}, Deployments: map[string]string{"U_S": us}}
		}, []string{`--served-zones: "EU" is not a DNS label`, `--zone-deployments: zone "U_S" is not a DNS label`}},
		{"URLs", func(c *postgres.StoreConfig) {
			c.Zones = fleet.Zones{Served: []string{"eu"}, Deployments: map[string]string{
				"us": "http://fleet.us.example.com", "ap": "https:///no-host", "sa": "https://fleet.sa.example.com/?x=1"}}
		}, []string{`--zone-deployments: zone us: "http://fleet.us.example.com" must be an https URL`,
			`--zone-deployments: zone ap:`, `--zone-deployments: zone sa:`}},
		{"a served zone mapped elsewhere", func(c *postgres.StoreConfig) {
			c.Zones = fleet.Zones{Served: []string{"eu"}, Deployments: map[string]string{"eu": us}}
		}, []string{"--zone-deployments: zone eu is served by this deployment"}},
		{"a map without served zones", func(c *postgres.StoreConfig) {
			c.Zones = fleet.Zones{Deployments: map[string]string{"us": us}}
		}, []string{"--zone-deployments: needs --served-zones"}},
		{"a default zone not served", func(c *postgres.StoreConfig) {
			c.Zones = fleet.Zones{Served: []string{"eu"}}
			c.DefaultZone = "us"
		}, []string{`--registration-default-zone: "us" is not one of --served-zones [eu]`}},
	}
	for _, tc := range cases {
		cfg := postgres.DefaultStoreConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Validate() = nil, want %q", tc.name, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q, want it to contain %q", tc.name, err, w)
			}
		}
	}
}

func TestZoneDeploymentsFlag(t *testing.T) {
	t.Parallel()
	cases := []struct {
		value   string
		want    map[string]string
		wantErr string
	}{
		{"", map[string]string{}, ""},
		{"us=https://fleet.us.example.com/api/fleet_manager/v1, ap = https://fleet.ap.example.com",
			map[string]string{"us": "https://fleet.us.example.com/api/fleet_manager/v1", "ap": "https://fleet.ap.example.com"}, ""},
		{"us", nil, `"us" must be zone=URL`},
		{"=https://x", nil, `"=https://x" must be zone=URL`},
		{"us=https://a,us=https://b", nil, "zone us is given twice"},
	}
	for _, tc := range cases {
		cfg := postgres.DefaultStoreConfig()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		err := fs.Set("zone-deployments", tc.value)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(--zone-deployments=%q) = %v, want an error containing %q", tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(cfg.Zones.Deployments, tc.want) {
			t.Errorf("Set(--zone-deployments=%q) = %v, %v; want %v", tc.value, cfg.Zones.Deployments, err, tc.want)
		}
	}
}
