package rest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/openapi"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*rest.Config)
		want   []string
	}{
		{"defaults", func(*rest.Config) {}, nil},
		{"fork names", func(c *rest.Config) {
			c.ServiceName, c.BasePath, c.ErrorCodePrefix = "acme-fleet", "/api/acme/v2", "ACME-FLT"
		}, nil},
		{"service name", func(c *rest.Config) { c.ServiceName = "Fleet_Manager" }, []string{"--service-name: must be a DNS label"}},
		{"base path trailing slash", func(c *rest.Config) { c.BasePath = "/api/fm/" }, []string{"--api-base-path: must start with /"}},
		{"base path relative", func(c *rest.Config) { c.BasePath = "api" }, []string{"--api-base-path"}},
		{"prefix", func(c *rest.Config) { c.ErrorCodePrefix = "fleet-" }, []string{"--error-code-prefix"}},
		{"address", func(c *rest.Config) { c.APIBindAddress = "8000" }, []string{"--api-bind-address: must be host:port"}},
		{"port clash", func(c *rest.Config) { c.HealthBindAddress = ":8080" }, []string{"--health-bind-address: port 8080 is already taken by --metrics-bind-address"}},
		{"timeouts", func(c *rest.Config) { c.ShutdownTimeout, c.ReadTimeout = 0, -time.Second }, []string{"--shutdown-timeout: must be positive", "--api-read-timeout: must be positive"}},
		{"request deadline", func(c *rest.Config) { c.RequestTimeout = 0 }, []string{"--api-request-timeout: must be positive"}},
		{"long-poll deadline", func(c *rest.Config) { c.RequestTimeout = time.Minute }, []string{
			"--api-request-timeout: must be positive, and with the longest long-poll wait (1m0s) below --api-write-timeout 2m0s (got 1m0s)"}},
		{"body", func(c *rest.Config) { c.MaxBodyBytes = 10 }, []string{"--api-max-body-bytes"}},
		{"batch max", func(c *rest.Config) { c.RegistrationBatchMax = 0 }, []string{"--registration-batch-max: must be at least 1"}},
		{"desired concurrency", func(c *rest.Config) { c.AgentDesiredConcurrency = 0 }, []string{"--agent-desired-concurrency: must be at least 1"}},
		{"batch concurrency", func(c *rest.Config) { c.RegistrationBatchConcurrency = 0 }, []string{"--registration-batch-concurrency: must be at least 1"}},
		{"batch body", func(c *rest.Config) { c.RegistrationBatchMaxBodyBytes = c.MaxBodyBytes - 1 }, []string{
			"--registration-batch-max-body-bytes: must be at least --api-max-body-bytes"}},
		{"public path", func(c *rest.Config) { c.PublicPaths = []string{"errors"} }, []string{`--auth-public-paths: "errors" must start with /`}},
		{"cors", func(c *rest.Config) { c.CORS.AllowedOrigins, c.CORS.AllowCredentials = []string{"*"}, true }, []string{"--cors-allow-credentials"}},
	}
	for _, tc := range cases {
		cfg := rest.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if (err == nil) != (tc.want == nil) {
			t.Errorf("%s: Validate() = %v, want problems %q", tc.name, err, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q, want it to contain %q", tc.name, err, w)
			}
		}
	}
}

// TestDefaultPublicPathsMatchTheSpec keeps the default public paths and the
// spec's `security: []` declarations in step.
func TestDefaultPublicPathsMatchTheSpec(t *testing.T) {
	t.Parallel()
	data, err := openapi.Specs.ReadFile(openapi.Public)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for path, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 && !slices.Contains(open, path) {
				open = append(open, path)
			}
		}
	}
	slices.Sort(open)
	defaults := slices.Sorted(slices.Values(rest.DefaultConfig().PublicPaths))
	if !slices.Equal(open, defaults) {
		t.Errorf("spec paths without security = %v, default --auth-public-paths = %v; want the same", open, defaults)
	}
}

func TestHandlerRefusesUnknownPublicPath(t *testing.T) {
	t.Parallel()
	cfg := rest.DefaultConfig()
	cfg.PublicPaths = []string{"/errors", "/clusterz"}
	metrics, err := rest.NewHTTPMetrics(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rest.NewServer(context.Background(), cfg, discard(), nil, metrics, rest.Services{})
	if err != nil {
		t.Fatalf("NewServer(): %v", err)
	}
	if _, err := srv.Handler(); err == nil || !strings.Contains(err.Error(), "--auth-public-paths: /clusterz is not a path of the API") {
		t.Errorf("Handler() with an unknown public path = %v, want a refusal naming it", err)
	}
}
