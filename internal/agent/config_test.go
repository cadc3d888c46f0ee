package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func validConfig() Config {
	c := DefaultConfig()
	c.FleetManagerURL = "https://fleet.example.com/api/fleet_manager/v1"
	c.HubID = "hub-1"
	c.TokenFile = "/var/run/secrets/fleet/token"
	return c
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		mutate   func(*Config)
		wantFlag []string // flags the error must name; none: valid
	}{
		{"defaults with a URL, hub and token", func(*Config) {}, nil},
		{"OIDC instead of a token file", func(c *Config) {
			c.TokenFile, c.OIDCTokenURL, c.OIDCClientID, c.OIDCClientSecretFile = "", "https://sso.example.com/token", "agent", "/secret"
		}, nil},
		{"no URL", func(c *Config) { c.FleetManagerURL = "" }, []string{"fleet-manager-url"}},
		{"relative URL", func(c *Config) { c.FleetManagerURL = "/api/fleet_manager/v1" }, []string{"fleet-manager-url"}},
		{"bad hub id", func(c *Config) { c.HubID = "hub_1" }, []string{"hub-id"}},
		{"no auth", func(c *Config) { c.TokenFile = "" }, []string{"token-file"}},
		{"both auths", func(c *Config) { c.OIDCTokenURL = "https://sso.example.com/token" }, []string{"token-file"}},
		{"OIDC without client", func(c *Config) { c.TokenFile, c.OIDCTokenURL = "", "https://sso.example.com/token" },
			[]string{"oidc-client-id", "oidc-client-secret-file"}},
		{"OIDC without URL", func(c *Config) { c.TokenFile, c.OIDCClientID, c.OIDCClientSecretFile = "", "agent", "/secret" },
			[]string{"oidc-token-url"}},
		{"zero sizes and durations", func(c *Config) {
			c.InventoryBatchSize, c.InventoryBatchDelay, c.ResyncInterval, c.DeletionTimeout, c.HeartbeatInterval = 0, 0, 0, 0, 0
		}, []string{"inventory-batch-size", "inventory-batch-delay", "resync-interval", "deletion-timeout", "heartbeat-interval"}},
		{"batch beyond the API's bound", func(c *Config) { c.InventoryBatchSize = 5001 }, []string{"inventory-batch-size"}},
		{"poll wait not in whole ms", func(c *Config) { c.PollWait = 30*time.Second + 500*time.Microsecond }, []string{"poll-wait"}},
		{"empty field manager", func(c *Config) { c.FieldManager = "" }, []string{"field-manager"}},
		{"same bind addresses", func(c *Config) { c.MetricsBindAddress = c.HealthBindAddress }, []string{"metrics-bind-address"}},
		{"bad bind address", func(c *Config) { c.HealthBindAddress = "8081" }, []string{"health-bind-address"}},
		{"lease names", func(c *Config) { c.LeaseName, c.LeaseNamespace = "Fleet_Sync", "a.b" }, []string{"lease-name", "lease-namespace"}},
		{"lease shorter than its renew deadline", func(c *Config) { c.LeaseDuration = c.LeaseRenewDeadline }, []string{"lease-duration"}},
		{"renew deadline within a retry", func(c *Config) { c.LeaseRenewDeadline = c.LeaseRetryPeriod }, []string{"lease-renew-deadline"}},
		{"no retry period or shutdown time", func(c *Config) { c.LeaseRetryPeriod, c.ShutdownTimeout = 0, 0 }, []string{"lease-retry-period", "shutdown-timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.wantFlag) == 0 {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want problems with %v", tt.wantFlag)
			}
			for _, f := range tt.wantFlag {
				if !strings.Contains(err.Error(), "--"+f+":") {
					t.Errorf("Validate() = %v, want a problem naming --%s", err, f)
				}
			}
		})
	}
}

func TestConfigLeaseName(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.HubID = "Hub-EU-1"
	if got := c.Lease(); got != "fleetshard-sync-hub-eu-1" {
		t.Errorf("Lease() of hub %s = %q, want fleetshard-sync-hub-eu-1", c.HubID, got)
	}
	c.LeaseName = "agent"
	if got := c.Lease(); got != "agent" {
		t.Errorf("Lease() with --lease-name=agent = %q, want agent", got)
	}
}

func TestConfigFlags(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	c.AddFlags(fs)
	err := fs.Parse([]string{
		"--fleet-manager-url=https://f.example.com/api/fleet_manager/v1", "--hub-id=h", "--oidc-token-url=https://sso/token",
		"--oidc-client-id=id", "--oidc-client-secret-file=/s", "--oidc-audience=fleet", "--oidc-scopes=a,b",
		"--poll-wait=45s", "--inventory-batch-size=100",
	})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.PollWait != 45*time.Second || c.InventoryBatchSize != 100 || len(c.OIDCScopes) != 2 || c.OIDCAudience != "fleet" {
		t.Errorf("after Parse: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	for _, name := range []string{
		"fleet-manager-url", "hub-id", "kubeconfig", "token-file", "oidc-token-url", "oidc-client-id", "oidc-client-secret-file",
		"oidc-audience", "oidc-scopes", "field-manager", "poll-wait", "heartbeat-interval", "inventory-batch-size",
		"inventory-batch-delay", "resync-interval", "deletion-timeout", "health-bind-address", "metrics-bind-address",
		"lease-name", "lease-namespace", "lease-duration", "lease-renew-deadline", "lease-retry-period", "shutdown-timeout",
	} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s missing", name)
		}
	}
}

func TestHubNamespace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ name, context, want string }{
		{"with-namespace", "namespace: agents", "agents"},
		{"without", "", "default"},
	} {
		path := filepath.Join(dir, tt.name)
		kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: hub, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
			"users: [{name: agent, user: {token: t}}]\ncontexts: [{name: hub, context: {cluster: hub, user: agent, " + tt.context + "}}]\ncurrent-context: hub\n"
		if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := HubNamespace(path); got != tt.want {
			t.Errorf("HubNamespace(kubeconfig %s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
