// Package agent is fleetshard-sync, the agent that runs on each RHACM hub: it
// long-polls the fleet manager for the hub's desired set and applies it with
// server-side apply, removes what left the set, sends heartbeats, and reports
// the hub's ManagedCluster inventory and the hub-side status of its
// registrations (ARCHITECTURE.md, section 5).
package agent

import (
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// Config is the agent's configuration, one flag per field.
type Config struct {
	// FleetManagerURL is the fleet manager's base URL including the API base
	// path, e.g. https://fleet.example.com/api/fleet_manager/v1.
	FleetManagerURL string
	// HubID is the hub this agent serves.
	HubID string
	// Kubeconfig reaches the hub; empty means in-cluster.
	Kubeconfig string

	// TokenFile holds a bearer token, re-read when it changes. Exclusive
	// with the OIDC client-credentials settings.
	TokenFile string
	// OIDC client-credentials grant: the token endpoint, the client and the
	// file holding its secret, and optionally an audience and scopes.
	OIDCTokenURL         string
	OIDCClientID         string
	OIDCClientSecretFile string
	OIDCAudience         string
	OIDCScopes           []string

	// FieldManager is the server-side apply field manager.
	FieldManager string
	// PollWait is how long one desired-set long-poll waits for a change.
	PollWait time.Duration
	// HeartbeatInterval is how often the hub status is sent.
	HeartbeatInterval time.Duration
	// InventoryBatchSize bounds the clusters (or registrations) of one batch.
	InventoryBatchSize int
	// InventoryBatchDelay bounds how long a change waits for others to join its batch.
	InventoryBatchDelay time.Duration
	// ResyncInterval is how often the whole inventory is sent again.
	ResyncInterval time.Duration
	// FullSetInterval is how long the agent takes changes since the
	// revision it applied before it asks for the hub's whole desired set
	// again, at the next revision.
	FullSetInterval time.Duration
	// DeletionTimeout bounds the wait for a removed ManagedCluster to be gone.
	DeletionTimeout time.Duration

	// LeaseName and LeaseNamespace name the coordination.k8s.io Lease that
	// lets one agent of the hub act at a time. An empty name is
	// "fleetshard-sync-" and the hub id in lower case; an empty namespace is
	// the pod's (in-cluster) or the kubeconfig context's, else "default".
	LeaseName      string
	LeaseNamespace string
	// LeaseDuration is how long a standby waits after the leader's last
	// renewal before it takes the lease; the leader gives up when it could
	// not renew within LeaseRenewDeadline; both try every LeaseRetryPeriod.
	LeaseDuration      time.Duration
	LeaseRenewDeadline time.Duration
	LeaseRetryPeriod   time.Duration
	// ShutdownTimeout bounds the stop after SIGTERM: the loops, the lease's
	// release and the health and metrics servers' drain. It must stay below
	// the pod's terminationGracePeriodSeconds.
	ShutdownTimeout time.Duration

	HealthBindAddress  string
	MetricsBindAddress string
	// MetricsPprof serves Go's runtime profiles on the metrics server.
	MetricsPprof bool
}

// Lease returns the name of the lease, its default filled in.
func (c Config) Lease() string {
	if c.LeaseName != "" {
		return c.LeaseName
	}
	return "fleetshard-sync-" + strings.ToLower(c.HubID)
}

// DefaultConfig returns the agent's defaults.
func DefaultConfig() Config {
	return Config{
		FieldManager:        "fleetshard-sync",
		PollWait:            30 * time.Second,
		HeartbeatInterval:   15 * time.Second,
		InventoryBatchSize:  500,
		InventoryBatchDelay: time.Second,
		ResyncInterval:      10 * time.Minute,
		FullSetInterval:     10 * time.Minute,
		DeletionTimeout:     10 * time.Minute,
		LeaseDuration:       15 * time.Second,
		LeaseRenewDeadline:  10 * time.Second,
		LeaseRetryPeriod:    2 * time.Second,
		ShutdownTimeout:     25 * time.Second,
		HealthBindAddress:   ":8081",
		MetricsBindAddress:  ":8082",
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.FleetManagerURL, "fleet-manager-url", c.FleetManagerURL, "base URL of the fleet manager, including the API base path (e.g. https://fleet.example.com/api/fleet_manager/v1)")
	fs.StringVar(&c.HubID, "hub-id", c.HubID, "id of the hub this agent serves")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig of the hub (empty: in-cluster)")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file holding the bearer token for the fleet manager, re-read when it changes")
	fs.StringVar(&c.OIDCTokenURL, "oidc-token-url", c.OIDCTokenURL, "OIDC token endpoint for the client-credentials grant (instead of --token-file)")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", c.OIDCClientID, "OIDC client id")
	fs.StringVar(&c.OIDCClientSecretFile, "oidc-client-secret-file", c.OIDCClientSecretFile, "file holding the OIDC client secret")
	fs.StringVar(&c.OIDCAudience, "oidc-audience", c.OIDCAudience, "audience asked of the token endpoint (optional)")
	fs.StringSliceVar(&c.OIDCScopes, "oidc-scopes", c.OIDCScopes, "scopes asked of the token endpoint (optional)")
	fs.StringVar(&c.FieldManager, "field-manager", c.FieldManager, "server-side apply field manager on the hub")
	fs.DurationVar(&c.PollWait, "poll-wait", c.PollWait, "how long one long-poll for the desired set waits for a change")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", c.HeartbeatInterval, "how often the hub status (heartbeat) is sent")
	fs.IntVar(&c.InventoryBatchSize, "inventory-batch-size", c.InventoryBatchSize, "most clusters in one inventory (or registration status) batch")
	fs.DurationVar(&c.InventoryBatchDelay, "inventory-batch-delay", c.InventoryBatchDelay, "longest a change waits for others to join its batch")
	fs.DurationVar(&c.ResyncInterval, "resync-interval", c.ResyncInterval, "how often the whole inventory is sent again")
	fs.DurationVar(&c.FullSetInterval, "full-set-interval", c.FullSetInterval,
		"how often the whole desired set is asked for and applied; in between, only the changes since the applied revision")
	fs.DurationVar(&c.DeletionTimeout, "deletion-timeout", c.DeletionTimeout, "how long a removed ManagedCluster may take to be gone before the pass fails and is retried")
	fs.StringVar(&c.LeaseName, "lease-name", c.LeaseName, "name of the Lease that lets one agent of the hub act at a time (empty: fleetshard-sync-<hub id in lower case>)")
	fs.StringVar(&c.LeaseNamespace, "lease-namespace", c.LeaseNamespace, "namespace of the Lease (empty: the pod's in-cluster, else the kubeconfig context's, else default)")
	fs.DurationVar(&c.LeaseDuration, "lease-duration", c.LeaseDuration, "how long a standby agent waits after the leader's last renewal before it takes the lease")
	fs.DurationVar(&c.LeaseRenewDeadline, "lease-renew-deadline", c.LeaseRenewDeadline, "how long the leader tries to renew the lease before it stops acting")
	fs.DurationVar(&c.LeaseRetryPeriod, "lease-retry-period", c.LeaseRetryPeriod, "how often the agents try to take or renew the lease")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "longest stop after SIGTERM (loops, lease release, servers' drain); keep it below the pod's termination grace period")
	fs.StringVar(&c.HealthBindAddress, "health-bind-address", c.HealthBindAddress, "address the health server (/healthz, /readyz) listens on")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address the metrics server (/metrics) listens on")
	fs.BoolVar(&c.MetricsPprof, "metrics-pprof", c.MetricsPprof, "serve Go's runtime profiles (net/http/pprof) at /debug/pprof/ on the metrics server")
}

var hubIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// maxBatch is the private API's bound on the items of one batch.
const maxBatch = 5000

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	validateURL(&p, "fleet-manager-url", c.FleetManagerURL, true)
	if !hubIDPattern.MatchString(c.HubID) {
		p.Addf("hub-id", "must be 1 to 64 letters, digits or dashes (got %q)", c.HubID)
	}
	c.validateAuth(&p)
	if c.FieldManager == "" || len(c.FieldManager) > 128 {
		p.Addf("field-manager", "must be 1 to 128 characters (got %q)", c.FieldManager)
	}
	if c.PollWait < time.Second || c.PollWait > 10*time.Minute || c.PollWait%time.Millisecond != 0 {
		p.Addf("poll-wait", "must be whole milliseconds between 1s and 10m (got %s)", c.PollWait)
	}
	if c.HeartbeatInterval < time.Second {
		p.Addf("heartbeat-interval", "must be at least 1s (got %s)", c.HeartbeatInterval)
	}
	if c.InventoryBatchSize < 1 || c.InventoryBatchSize > maxBatch {
		p.Addf("inventory-batch-size", "must be between 1 and %d (got %d)", maxBatch, c.InventoryBatchSize)
	}
	for flag, d := range map[string]time.Duration{
		"inventory-batch-delay": c.InventoryBatchDelay, "resync-interval": c.ResyncInterval, "deletion-timeout": c.DeletionTimeout,
		"full-set-interval": c.FullSetInterval,
	} {
		if d <= 0 {
			p.Addf(flag, "must be positive (got %s)", d)
		}
	}
	c.validateLease(&p)
	for flag, addr := range map[string]string{"health-bind-address": c.HealthBindAddress, "metrics-bind-address": c.MetricsBindAddress} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			p.Addf(flag, "must be host:port (got %q)", addr)
		}
	}
	if c.HealthBindAddress == c.MetricsBindAddress {
		p.Addf("metrics-bind-address", "must differ from --health-bind-address (both %q)", c.MetricsBindAddress)
	}
	return p.Err()
}

// validateLease checks the lease's names, and its durations as the leader
// elector does: the lease outlasts the renew deadline, which outlasts a retry
// and its jitter.
func (c Config) validateLease(p *config.Problems) {
	if c.LeaseName != "" {
		if errs := validation.IsDNS1123Subdomain(c.LeaseName); len(errs) > 0 {
			p.Addf("lease-name", "must be a DNS subdomain: %s", strings.Join(errs, "; "))
		}
	}
	if c.LeaseNamespace != "" {
		if errs := validation.IsDNS1123Label(c.LeaseNamespace); len(errs) > 0 {
			p.Addf("lease-namespace", "must be a DNS label: %s", strings.Join(errs, "; "))
		}
	}
	switch {
	case c.LeaseRetryPeriod <= 0:
		p.Addf("lease-retry-period", "must be positive (got %s)", c.LeaseRetryPeriod)
	case float64(c.LeaseRenewDeadline) <= leaderelection.JitterFactor*float64(c.LeaseRetryPeriod):
		p.Addf("lease-renew-deadline", "must exceed %g times --lease-retry-period (got %s, retry period %s)", leaderelection.JitterFactor, c.LeaseRenewDeadline, c.LeaseRetryPeriod)
	case c.LeaseDuration <= c.LeaseRenewDeadline:
		p.Addf("lease-duration", "must exceed --lease-renew-deadline (got %s, renew deadline %s)", c.LeaseDuration, c.LeaseRenewDeadline)
	}
	if c.ShutdownTimeout <= 0 {
		p.Addf("shutdown-timeout", "must be positive (got %s)", c.ShutdownTimeout)
	}
}

// validateAuth wants exactly one way to authenticate: a token file, or the
// OIDC client-credentials grant with its client and secret.
func (c Config) validateAuth(p *config.Problems) {
	oidc := c.OIDCTokenURL != "" || c.OIDCClientID != "" || c.OIDCClientSecretFile != "" || c.OIDCAudience != "" || len(c.OIDCScopes) > 0
	switch {
	case c.TokenFile != "" && oidc:
		p.Addf("token-file", "must not be set together with --oidc-* settings: choose one way to authenticate")
	case c.TokenFile == "" && !oidc:
		p.Addf("token-file", "required, or else --oidc-token-url, --oidc-client-id and --oidc-client-secret-file")
	case oidc:
		validateURL(p, "oidc-token-url", c.OIDCTokenURL, false)
		if c.OIDCClientID == "" {
			p.Addf("oidc-client-id", "required with --oidc-token-url")
		}
		if c.OIDCClientSecretFile == "" {
			p.Addf("oidc-client-secret-file", "required with --oidc-token-url")
		}
	}
}

func validateURL(p *config.Problems, flag, raw string, base bool) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		p.Addf(flag, "required")
	case err != nil:
		p.Addf(flag, "must be a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		p.Addf(flag, "must be an absolute http or https URL (got %q)", raw)
	case base && (u.RawQuery != "" || u.Fragment != ""):
		p.Addf(flag, "must have no query or fragment (got %q)", raw)
	}
}
