package fleet_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestIngressRouterHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, host string
		ok        bool
	}{
		{"https://console-openshift-console.apps.c1.example.com", "router-default.apps.c1.example.com", true},
		{"https://console-openshift-console.apps.c1.example.com/", "router-default.apps.c1.example.com", true},
		{"https://Console-OpenShift-Console.Apps.C1.Example.COM:443/dashboards", "router-default.apps.c1.example.com", true},
		{"https://console-openshift-console.apps.c1.example.com.", "router-default.apps.c1.example.com", true},
		{"", "", false},
		{"console-openshift-console.apps.c1.example.com", "", false},
		{"ftp://console-openshift-console.apps.c1.example.com", "", false},
		{"https://console.apps.c1.example.com", "", false},
		{"https://console-openshift-console.com", "", false},
		{"https://console-openshift-console.apps..example.com", "", false},
		{"https://console-openshift-console.apps_x.example.com", "", false},
		{"https://10.0.0.1", "", false},
		{"%%", "", false},
	} {
		host, ok := fleet.IngressRouterHost(tc.url)
		if host != tc.host || ok != tc.ok {
			t.Errorf("IngressRouterHost(%q) = %q, %v; want %q, %v", tc.url, host, ok, tc.host, tc.ok)
		}
	}
}
