// Package rest is the HTTP edge: the API server (routes from the OpenAPI
// specs, request validation, authentication, CORS, error bodies) and the
// configuration of the three servers of `fleet-manager serve` (API, health and
// metrics); internal/httpserve binds, serves and shuts them down, and serves the
// health and metrics endpoints.
package rest

import (
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
)

// Config configures the HTTP servers. Everything a fork renames is here.
type Config struct {
	// ServiceName names the service in logs and prefixes its metrics.
	ServiceName string
	// BasePath is the API's path prefix, e.g. /api/fleet_manager/v1.
	BasePath string
	// ErrorCodePrefix prefixes error codes: <prefix>-<n>.
	ErrorCodePrefix string

	APIBindAddress     string
	MetricsBindAddress string
	HealthBindAddress  string
	// MetricsPprof serves Go's runtime profiles on the metrics server.
	MetricsPprof bool

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	ReadyTimeout      time.Duration
	// RequestTimeout is every request's deadline, in its context: a database
	// that does not answer fails the request with 503 within it. Long-polls
	// get their longest wait on top.
	RequestTimeout time.Duration
	MaxBodyBytes   int64
	// Gzip compresses the answers of clients that accept gzip (compress.go).
	Gzip bool
	// AgentMaxBodyBytes is the limit of the agents' API, whose inventory
	// batches of hundreds of clusters are larger than any user request.
	AgentMaxBodyBytes int64
	// AgentIngestConcurrency bounds the inventory batches handled at once.
	AgentIngestConcurrency int
	// AgentDesiredConcurrency bounds the desired sets read and written at once.
	AgentDesiredConcurrency int
	// RegistrationBatchMax is the most items of a batch create
	// (POST /clusters:batch); RegistrationBatchMaxBodyBytes bounds its body,
	// which carries that many registrations, credentials included.
	RegistrationBatchMax          int
	RegistrationBatchMaxBodyBytes int64
	// RegistrationBatchConcurrency bounds the batch creates handled at once.
	RegistrationBatchConcurrency int

	// PublicPaths are spec paths (relative to BasePath) served without a token.
	PublicPaths []string
	// AgentMaxWait caps an agent's long-poll; AgentDefaultWait is used when it names none.
	AgentMaxWait     time.Duration
	AgentDefaultWait time.Duration
	// FeedMaxWait caps a change feed long-poll; without `wait` the feed answers at once.
	FeedMaxWait time.Duration
	// AdminRoles may change hubs; AdminReadRoles may read them.
	AdminRoles     []string
	AdminReadRoles []string
	// OrgRoles maps the roles claim to org roles. It has no flags of its own
	// here: the composition root fills it from the authz configuration.
	OrgRoles fleet.RoleMap

	CORS CORSConfig
}

// CORSConfig configures cross-origin requests; no allowed origins turns CORS off.
type CORSConfig struct {
	AllowedOrigins   []string
	AllowedMethods   []string
	AllowedHeaders   []string
	ExposedHeaders   []string
	AllowCredentials bool
	MaxAge           time.Duration
}

// DefaultConfig returns the configuration of the upstream service.
func DefaultConfig() Config {
	timeouts := httpserve.DefaultTimeouts()
	return Config{
		ServiceName:             "fleet-manager",
		BasePath:                "/api/fleet_manager/v1",
		ErrorCodePrefix:         "FLEET-MGMT",
		APIBindAddress:          ":8000",
		MetricsBindAddress:      ":8080",
		HealthBindAddress:       ":8083",
		ReadHeaderTimeout:       timeouts.ReadHeader,
		ReadTimeout:             timeouts.Read,
		WriteTimeout:            timeouts.Write,
		IdleTimeout:             timeouts.Idle,
		ShutdownTimeout:         30 * time.Second,
		ReadyTimeout:            2 * time.Second,
		RequestTimeout:          30 * time.Second,
		MaxBodyBytes:            1 << 20,
		Gzip:                    true,
		AgentMaxBodyBytes:       64 << 20,
		AgentIngestConcurrency:  8,
		AgentDesiredConcurrency: 8,
		PublicPaths:             []string{"/", "/openapi", "/errors", "/errors/{id}"},
		AgentMaxWait:            time.Minute,
		AgentDefaultWait:        30 * time.Second,
		FeedMaxWait:             time.Minute,
		AdminRoles:              []string{"fleet-admin"},
		AdminReadRoles:          []string{"fleet-admin", "fleet-viewer"},
		OrgRoles:                fleet.DefaultRoleMap(),

		// A thousand items with a kubeconfig of up to 16 KiB each.
		RegistrationBatchMax:          1000,
		RegistrationBatchMaxBodyBytes: 16 << 20,
		RegistrationBatchConcurrency:  4,

		CORS: CORSConfig{
			AllowedMethods: []string{"GET", "POST", "PUT", "PATCH", "DELETE"},
			AllowedHeaders: []string{"Authorization", "Content-Type", "If-Match", "Idempotency-Key", OperationIDHeader},
			ExposedHeaders: []string{"ETag", "Location", OperationIDHeader},
			MaxAge:         10 * time.Minute,
		},
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.ServiceName, "service-name", c.ServiceName, "service name, used in logs and as the metrics prefix")
	fs.StringVar(&c.BasePath, "api-base-path", c.BasePath, "path prefix of the API")
	fs.StringVar(&c.ErrorCodePrefix, "error-code-prefix", c.ErrorCodePrefix, "prefix of error codes (<prefix>-<n>)")
	fs.StringVar(&c.APIBindAddress, "api-bind-address", c.APIBindAddress, "address the API server listens on")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address the metrics server listens on")
	fs.StringVar(&c.HealthBindAddress, "health-bind-address", c.HealthBindAddress, "address the health server listens on")
	fs.BoolVar(&c.MetricsPprof, "metrics-pprof", c.MetricsPprof, "serve Go's runtime profiles (net/http/pprof) at /debug/pprof/ on the metrics server")
	fs.DurationVar(&c.ReadHeaderTimeout, "api-read-header-timeout", c.ReadHeaderTimeout, "time allowed to read request headers")
	fs.DurationVar(&c.ReadTimeout, "api-read-timeout", c.ReadTimeout, "time allowed to read a whole request")
	fs.DurationVar(&c.WriteTimeout, "api-write-timeout", c.WriteTimeout, "time allowed to write a response (longer than any long-poll wait)")
	fs.DurationVar(&c.IdleTimeout, "api-idle-timeout", c.IdleTimeout, "how long an idle keep-alive connection is kept")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long in-flight requests may finish after SIGTERM")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", c.ReadyTimeout, "time the readiness check may take")
	fs.DurationVar(&c.RequestTimeout, "api-request-timeout", c.RequestTimeout,
		"deadline of a request's work (a long-poll's wait comes on top); past it the answer is 503 (below --api-write-timeout)")
	fs.Int64Var(&c.MaxBodyBytes, "api-max-body-bytes", c.MaxBodyBytes, "largest request body accepted")
	fs.BoolVar(&c.Gzip, "api-gzip", c.Gzip, "compress answers of 1 KiB or more with gzip for clients that accept it (Accept-Encoding)")
	fs.IntVar(&c.AgentIngestConcurrency, "agent-ingest-concurrency", c.AgentIngestConcurrency, "inventory batches handled at once (each holds its body in memory)")
	fs.IntVar(&c.AgentDesiredConcurrency, "agent-desired-concurrency", c.AgentDesiredConcurrency,
		"desired sets read and written at once (each reads its hub's registrations and renders their objects); the other agents' long-polls wait for a slot")
	fs.Int64Var(&c.AgentMaxBodyBytes, "agent-max-body-bytes", c.AgentMaxBodyBytes, "largest request body accepted from hub agents")
	fs.IntVar(&c.RegistrationBatchMax, "registration-batch-max", c.RegistrationBatchMax, "most clusters registered by one POST /clusters:batch")
	fs.Int64Var(&c.RegistrationBatchMaxBodyBytes, "registration-batch-max-body-bytes", c.RegistrationBatchMaxBodyBytes,
		"largest body of a POST /clusters:batch (at least --api-max-body-bytes)")
	fs.IntVar(&c.RegistrationBatchConcurrency, "registration-batch-concurrency", c.RegistrationBatchConcurrency,
		"batch creates (POST /clusters:batch) handled at once; the others wait, their bodies unread")
	fs.StringSliceVar(&c.PublicPaths, "auth-public-paths", c.PublicPaths, "spec paths, relative to the base path, served without a token")
	fs.DurationVar(&c.AgentMaxWait, "agent-max-wait", c.AgentMaxWait, "longest long-poll an agent may ask for (below --api-write-timeout)")
	fs.DurationVar(&c.AgentDefaultWait, "agent-default-wait", c.AgentDefaultWait, "long-poll wait when an agent names none")
	fs.DurationVar(&c.FeedMaxWait, "api-feed-max-wait", c.FeedMaxWait, "longest wait a change feed request may ask for (below --api-write-timeout)")
	fs.StringSliceVar(&c.AdminRoles, "admin-roles", c.AdminRoles, "roles that may change hubs through the admin API")
	fs.StringSliceVar(&c.AdminReadRoles, "admin-read-roles", c.AdminReadRoles, "roles that may read hubs through the admin API")
	fs.StringSliceVar(&c.CORS.AllowedOrigins, "cors-allowed-origins", c.CORS.AllowedOrigins, "origins allowed by CORS (empty: CORS off)")
	fs.StringSliceVar(&c.CORS.AllowedMethods, "cors-allowed-methods", c.CORS.AllowedMethods, "methods allowed by CORS")
	fs.StringSliceVar(&c.CORS.AllowedHeaders, "cors-allowed-headers", c.CORS.AllowedHeaders, "request headers allowed by CORS")
	fs.StringSliceVar(&c.CORS.ExposedHeaders, "cors-exposed-headers", c.CORS.ExposedHeaders, "response headers exposed by CORS")
	fs.BoolVar(&c.CORS.AllowCredentials, "cors-allow-credentials", c.CORS.AllowCredentials, "whether CORS allows credentials")
	fs.DurationVar(&c.CORS.MaxAge, "cors-max-age", c.CORS.MaxAge, "how long browsers may cache a preflight answer")
}

var (
	serviceNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,61}[a-z0-9]$`)
	basePathPattern    = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+$`)
	prefixPattern      = regexp.MustCompile(`^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*$`)
)

// ValidateServiceName reports a --service-name that is not a DNS label:
// serve's and the other commands' (their logs carry it).
func ValidateServiceName(name string) error {
	var p config.Problems
	if !serviceNamePattern.MatchString(name) {
		p.Addf("service-name", "must be a DNS label of lower-case letters, digits and dashes (got %q)", name)
	}
	return p.Err()
}

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	p.Merge(ValidateServiceName(c.ServiceName))
	if !basePathPattern.MatchString(c.BasePath) {
		p.Addf("api-base-path", "must start with / and have no trailing / or empty segment (got %q)", c.BasePath)
	}
	if !prefixPattern.MatchString(c.ErrorCodePrefix) {
		p.Addf("error-code-prefix", "must be upper-case letters and digits in dash-separated words (got %q)", c.ErrorCodePrefix)
	}
	c.validateAddresses(&p)
	for flag, d := range map[string]time.Duration{
		"api-read-header-timeout": c.ReadHeaderTimeout, "api-read-timeout": c.ReadTimeout,
		"api-write-timeout": c.WriteTimeout, "api-idle-timeout": c.IdleTimeout,
		"shutdown-timeout": c.ShutdownTimeout, "ready-timeout": c.ReadyTimeout,
	} {
		if d <= 0 {
			p.Addf(flag, "must be positive (got %s)", d)
		}
	}
	if c.MaxBodyBytes < 1024 {
		p.Addf("api-max-body-bytes", "must be at least 1024 (got %d)", c.MaxBodyBytes)
	}
	if c.AgentDesiredConcurrency < 1 {
		p.Addf("agent-desired-concurrency", "must be at least 1 (got %d)", c.AgentDesiredConcurrency)
	}
	if c.AgentIngestConcurrency < 1 {
		p.Addf("agent-ingest-concurrency", "must be at least 1 (got %d)", c.AgentIngestConcurrency)
	}
	if c.AgentMaxBodyBytes < 1024 {
		p.Addf("agent-max-body-bytes", "must be at least 1024 (got %d)", c.AgentMaxBodyBytes)
	}
	if c.RegistrationBatchConcurrency < 1 {
		p.Addf("registration-batch-concurrency", "must be at least 1 (got %d)", c.RegistrationBatchConcurrency)
	}
	if c.RegistrationBatchMax < 1 {
		p.Addf("registration-batch-max", "must be at least 1 (got %d)", c.RegistrationBatchMax)
	}
	// A batch carries at least one item as large as a single create may be.
	if c.RegistrationBatchMaxBodyBytes < c.MaxBodyBytes {
		p.Addf("registration-batch-max-body-bytes", "must be at least --api-max-body-bytes %d (got %d)", c.MaxBodyBytes, c.RegistrationBatchMaxBodyBytes)
	}
	for _, path := range c.PublicPaths {
		if !strings.HasPrefix(path, "/") {
			p.Addf("auth-public-paths", "%q must start with /", path)
		}
	}
	if c.AgentMaxWait <= 0 || c.AgentMaxWait >= c.WriteTimeout {
		p.Addf("agent-max-wait", "must be positive and below --api-write-timeout %s (got %s)", c.WriteTimeout, c.AgentMaxWait)
	}
	// A long-poll's deadline is its longest wait plus the request timeout.
	if longest := c.RequestTimeout + max(c.AgentMaxWait, c.FeedMaxWait); c.RequestTimeout <= 0 || longest >= c.WriteTimeout {
		p.Addf("api-request-timeout", "must be positive, and with the longest long-poll wait (%s) below --api-write-timeout %s (got %s)",
			max(c.AgentMaxWait, c.FeedMaxWait), c.WriteTimeout, c.RequestTimeout)
	}
	if c.FeedMaxWait <= 0 || c.FeedMaxWait >= c.WriteTimeout {
		p.Addf("api-feed-max-wait", "must be positive and below --api-write-timeout %s (got %s)", c.WriteTimeout, c.FeedMaxWait)
	}
	if c.AgentDefaultWait <= 0 || c.AgentDefaultWait > c.AgentMaxWait {
		p.Addf("agent-default-wait", "must be positive and at most --agent-max-wait (got %s)", c.AgentDefaultWait)
	}
	if len(c.AdminRoles) == 0 {
		p.Addf("admin-roles", "at least one role is required, or nobody could register a hub")
	}
	if c.CORS.AllowCredentials && containsWildcard(c.CORS.AllowedOrigins) {
		p.Addf("cors-allow-credentials", "cannot be true while --cors-allowed-origins contains *")
	}
	if c.CORS.MaxAge < 0 {
		p.Addf("cors-max-age", "must not be negative (got %s)", c.CORS.MaxAge)
	}
	return p.Err()
}

func (c Config) validateAddresses(p *config.Problems) {
	seen := map[string]string{}
	for _, a := range []struct{ flag, addr string }{
		{"api-bind-address", c.APIBindAddress},
		{"metrics-bind-address", c.MetricsBindAddress},
		{"health-bind-address", c.HealthBindAddress},
	} {
		_, port, err := net.SplitHostPort(a.addr)
		if err != nil {
			p.Addf(a.flag, "must be host:port (got %q)", a.addr)
			continue
		}
		if other, ok := seen[port]; ok && port != "0" {
			p.Addf(a.flag, "port %s is already taken by --%s", port, other)
		}
		seen[port] = a.flag
	}
}

func containsWildcard(origins []string) bool {
	for _, o := range origins {
		if o == "*" {
			return true
		}
	}
	return false
}

// MetricsNamespace returns the service name as a Prometheus metric prefix.
func (c Config) MetricsNamespace() string {
	return strings.ReplaceAll(c.ServiceName, "-", "_")
}
