package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/onsi/gomega"
	"github.com/spf13/pflag"
)

func TestAddFlags(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	cfg := auth.DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	args := []string{
		"--auth-jwks-url=https://sso.example.test/certs", "--auth-jwks-file=/etc/jwks.json",
		"--auth-issuers=https://a,https://b", "--auth-audience=api", "--auth-org-claim=org",
		"--auth-username-claims=user", "--auth-roles-claim=groups", "--auth-agent-claims=client_id,azp",
		"--auth-jwks-refresh-interval=2h", "--auth-jwks-refresh-rate-limit=5m",
		"--auth-jwks-request-timeout=3s", "--auth-clock-skew=1m", "--auth-dev-key-dir=/tmp/dev",
		"--auth-dev-issuer=dev",
	}
	g.Expect(fs.Parse(args)).To(gomega.Succeed(), "Parse(%v)", args)
	g.Expect(cfg).To(gomega.Equal(auth.Config{
		JWKSURL: "https://sso.example.test/certs", JWKSFile: "/etc/jwks.json",
		Issuers: []string{"https://a", "https://b"}, Audience: "api", OrgClaim: "org",
		UsernameClaims: []string{"user"}, RolesClaim: "groups", AgentClaims: []string{"client_id", "azp"},
		JWKSRefreshInterval: 2 * time.Hour, JWKSRefreshRateLimit: 5 * time.Minute,
		JWKSRequestTimeout: 3 * time.Second, ClockSkew: time.Minute, DevKeyDir: "/tmp/dev", DevIssuer: "dev",
	}), "Config after Parse(%v)", args)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := auth.DefaultConfig()
	valid.JWKSURL = "https://sso.example.test/certs"
	valid.Issuers = []string{testIssuer}
	change := func(f func(c *auth.Config)) auth.Config {
		c := valid
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  auth.Config
		want []string
	}{
		{"valid", valid, nil},
		{"dev key only needs no issuer", change(func(c *auth.Config) { c.JWKSURL, c.Issuers, c.DevKeyDir = "", nil, "/d" }), nil},
		{"no key source", change(func(c *auth.Config) { c.JWKSURL = "" }), []string{"--auth-jwks-url: a key source is required"}},
		{"URL not http", change(func(c *auth.Config) { c.JWKSURL = "file:///etc/jwks" }), []string{"--auth-jwks-url:"}},
		{"URL without host", change(func(c *auth.Config) { c.JWKSURL = "https://" }), []string{"--auth-jwks-url:"}},
		{"no issuer", change(func(c *auth.Config) { c.Issuers = nil }), []string{"--auth-issuers: at least one issuer is required"}},
		{"file needs an issuer", change(func(c *auth.Config) { c.JWKSURL, c.JWKSFile, c.Issuers = "", "/f", nil }),
			[]string{"--auth-issuers: at least one issuer is required"}},
		{"empty issuer", change(func(c *auth.Config) { c.Issuers = []string{""} }), []string{"--auth-issuers:"}},
		{"dev issuer empty", change(func(c *auth.Config) { c.DevKeyDir, c.DevIssuer = "/d", "" }), []string{"--auth-dev-issuer:"}},
		{"org claim empty", change(func(c *auth.Config) { c.OrgClaim = "" }), []string{"--auth-org-claim:"}},
		{"roles claim segment empty", change(func(c *auth.Config) { c.RolesClaim = "realm_access." }), []string{"--auth-roles-claim:"}},
		{"no username claims", change(func(c *auth.Config) { c.UsernameClaims = nil }), []string{"--auth-username-claims:"}},
		{"empty agent claim", change(func(c *auth.Config) { c.AgentClaims = []string{"azp", ""} }), []string{"--auth-agent-claims:"}},
		{"durations", change(func(c *auth.Config) {
			c.JWKSRefreshInterval, c.JWKSRefreshRateLimit, c.JWKSRequestTimeout, c.ClockSkew = 0, -1, 0, 0
		}), []string{"--auth-jwks-refresh-interval:", "--auth-jwks-refresh-rate-limit:",
			"--auth-jwks-request-timeout:", "--auth-clock-skew:"}},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("Validate(%s) = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Validate(%s) = nil, want %q", tt.name, tt.want)
			continue
		}
		for _, want := range tt.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Validate(%s) = %q, want it to contain %q", tt.name, err, want)
			}
		}
	}
}
