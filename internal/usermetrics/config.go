// Package usermetrics is the front door to each organisation's metrics
// (docs/user-facing-metrics.md): it confines PromQL queries to the caller's
// clusters and to the allow-list, forwards them to a Prometheus-compatible
// backend (Observatorium, Thanos, Prometheus) and renders the caller's
// clusters' metrics, with what the fleet manager itself knows of them, in
// the Prometheus text format.
package usermetrics

import (
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// Where a cluster's identity label takes its value from in the inventory.
const (
	// SourceClusterID is the cluster's id.openshift.io claim, as RHACM
	// observability labels its series (clusterID).
	SourceClusterID = "cluster-id"
	// SourceName is the ManagedCluster's name, unique on one hub only.
	SourceName = "name"
)

// Config configures the user-facing metrics. Everything a fork changes is
// here or in the allow-list file.
type Config struct {
	// BackendURL is the root of the backend's Prometheus HTTP API (the proxy
	// calls BackendURL/api/v1/query); empty turns the query endpoints off.
	BackendURL string
	// TenantHeader and Tenant name the backend tenant (Observatorium,
	// Thanos: THANOS-TENANT); empty sends none.
	TenantHeader string
	Tenant       string
	// TokenFile holds the bearer token sent to the backend; it is read again
	// when it changes, so a rotated token needs no restart.
	TokenFile string
	// CAFile verifies the backend's certificate; CertFile and KeyFile are
	// the client certificate presented to it.
	CAFile   string
	CertFile string
	KeyFile  string
	// BackendTimeout bounds one backend request (and is passed to it as the
	// query's timeout).
	BackendTimeout time.Duration
	// MaxResponseBytes bounds the backend answer read for one request.
	MaxResponseBytes int64

	// AllowListFile is the allow-list; empty uses the embedded default.
	AllowListFile string
	// ClusterLabel is the backend label carrying a cluster's identity;
	// ClusterLabelSource the inventory field it holds.
	ClusterLabel       string
	ClusterLabelSource string

	// MaxRange bounds a range query's span, and every range selector,
	// subquery and offset in a query, alone and added up along each
	// nesting (with @ modifiers counted from the query's time).
	MaxRange time.Duration
	// MinStep is the finest resolution of a range query or subquery;
	// MaxPoints the most points one series of an answer may have, and the
	// most steps a nesting of subqueries evaluates.
	MinStep   time.Duration
	MaxPoints int
	// MaxClusters bounds the clusters one request covers.
	MaxClusters int
	// ClusterCacheTTL is how long a query reuses an organisation's clusters
	// as read from the inventory (0: read them for every query).
	ClusterCacheTTL time.Duration
	// Rate and Burst are each organisation's request rate limit (per
	// second) and burst, over all the metrics endpoints.
	Rate  float64
	Burst int
}

// DefaultConfig returns the upstream defaults: no backend, RHACM
// observability's clusterID label.
func DefaultConfig() Config {
	return Config{
		BackendTimeout:     20 * time.Second,
		MaxResponseBytes:   32 << 20,
		ClusterLabel:       "clusterID",
		ClusterLabelSource: SourceClusterID,
		MaxRange:           31 * 24 * time.Hour,
		MinStep:            10 * time.Second,
		MaxPoints:          11000,
		MaxClusters:        5000,
		ClusterCacheTTL:    10 * time.Second,
		Rate:               10,
		Burst:              20,
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.BackendURL, "user-metrics-backend-url", c.BackendURL,
		"root of the metrics backend's Prometheus HTTP API (Observatorium, Thanos, Prometheus); empty turns the query endpoints off")
	fs.StringVar(&c.TenantHeader, "user-metrics-tenant-header", c.TenantHeader, "header naming the backend tenant, e.g. THANOS-TENANT (empty: none)")
	fs.StringVar(&c.Tenant, "user-metrics-tenant", c.Tenant, "backend tenant sent in --user-metrics-tenant-header")
	fs.StringVar(&c.TokenFile, "user-metrics-backend-token-file", c.TokenFile, "file holding the bearer token for the backend (read again when it changes)")
	fs.StringVar(&c.CAFile, "user-metrics-backend-ca-file", c.CAFile, "CA bundle that verifies the backend's certificate (empty: the system's)")
	fs.StringVar(&c.CertFile, "user-metrics-backend-cert-file", c.CertFile, "client certificate presented to the backend")
	fs.StringVar(&c.KeyFile, "user-metrics-backend-key-file", c.KeyFile, "key of --user-metrics-backend-cert-file")
	fs.DurationVar(&c.BackendTimeout, "user-metrics-backend-timeout", c.BackendTimeout, "longest backend request (below --api-request-timeout)")
	fs.Int64Var(&c.MaxResponseBytes, "user-metrics-max-response-bytes", c.MaxResponseBytes, "largest backend answer read for one request")
	fs.StringVar(&c.AllowListFile, "user-metrics-allow-list-file", c.AllowListFile, "YAML allow-list of user-facing metric names and labels (empty: the embedded default)")
	fs.StringVar(&c.ClusterLabel, "user-metrics-cluster-label", c.ClusterLabel, "backend label that carries a cluster's identity")
	fs.StringVar(&c.ClusterLabelSource, "user-metrics-cluster-label-source", c.ClusterLabelSource,
		"what --user-metrics-cluster-label holds: cluster-id (the id.openshift.io claim) or name (the ManagedCluster's name: one hub only)")
	fs.DurationVar(&c.MaxRange, "user-metrics-max-range", c.MaxRange, "longest span of a range query, range selector, subquery or offset, and of their sum along a query's nesting")
	fs.DurationVar(&c.MinStep, "user-metrics-min-step", c.MinStep, "finest resolution of a range query or subquery")
	fs.IntVar(&c.MaxPoints, "user-metrics-max-points", c.MaxPoints, "most points per series of a range query or subquery, and steps of nested subqueries together")
	fs.IntVar(&c.MaxClusters, "user-metrics-max-clusters", c.MaxClusters, "most clusters one metrics request covers")
	fs.DurationVar(&c.ClusterCacheTTL, "user-metrics-cluster-cache-ttl", c.ClusterCacheTTL,
		"how long queries reuse an organisation's clusters as read from the inventory (0: read them for every query); a cluster that leaves the organisation is readable that much longer")
	fs.Float64Var(&c.Rate, "user-metrics-rate", c.Rate, "metrics requests per second per organisation")
	fs.IntVar(&c.Burst, "user-metrics-burst", c.Burst, "burst of metrics requests per organisation")
}

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	if c.BackendURL != "" {
		u, err := url.Parse(c.BackendURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
			p.Addf("user-metrics-backend-url", "must be an http or https URL without query or credentials")
		}
	}
	if (c.TenantHeader == "") != (c.Tenant == "") {
		p.Addf("user-metrics-tenant", "must be set together with --user-metrics-tenant-header")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		p.Addf("user-metrics-backend-key-file", "must be set together with --user-metrics-backend-cert-file")
	}
	if c.BackendTimeout <= 0 {
		p.Addf("user-metrics-backend-timeout", "must be positive (got %s)", c.BackendTimeout)
	}
	if c.MaxResponseBytes < 1024 {
		p.Addf("user-metrics-max-response-bytes", "must be at least 1024 (got %d)", c.MaxResponseBytes)
	}
	if !labelNamePattern.MatchString(c.ClusterLabel) {
		p.Addf("user-metrics-cluster-label", "must be a Prometheus label name (got %q)", c.ClusterLabel)
	}
	if c.ClusterLabelSource != SourceClusterID && c.ClusterLabelSource != SourceName {
		p.Addf("user-metrics-cluster-label-source", "must be %s or %s (got %q)", SourceClusterID, SourceName, c.ClusterLabelSource)
	}
	if c.MaxRange <= 0 {
		p.Addf("user-metrics-max-range", "must be positive (got %s)", c.MaxRange)
	}
	if c.MinStep <= 0 {
		p.Addf("user-metrics-min-step", "must be positive (got %s)", c.MinStep)
	}
	if c.MaxPoints < 1 {
		p.Addf("user-metrics-max-points", "must be at least 1 (got %d)", c.MaxPoints)
	}
	if c.MaxClusters < 1 {
		p.Addf("user-metrics-max-clusters", "must be at least 1 (got %d)", c.MaxClusters)
	}
	if c.ClusterCacheTTL < 0 || c.ClusterCacheTTL > 5*time.Minute {
		p.Addf("user-metrics-cluster-cache-ttl", "must be between 0 and 5m (got %s)", c.ClusterCacheTTL)
	}
	if c.Rate <= 0 {
		p.Addf("user-metrics-rate", "must be positive (got %g)", c.Rate)
	}
	if c.Burst < 1 {
		p.Addf("user-metrics-burst", "must be at least 1 (got %d)", c.Burst)
	}
	return p.Err()
}
