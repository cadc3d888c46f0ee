// Package auth verifies the JWT bearer tokens of callers and agents.
//
// Keys come from a remote JWKS (refreshed in the background and on unknown key
// ids, rate-limited), from a JWKS file, and from a development signing key that
// the package can create and mint tokens with. Which claims fill which field of
// fleet.Identity is configuration, so a fork with another identity provider
// changes flags, not code.
package auth

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/spf13/pflag"
)

// Config is the configuration of the token verifier and of the development key.
type Config struct {
	// JWKSURL is the http(s) address of the identity provider's JWKS.
	JWKSURL string
	// JWKSFile is a file holding a JWKS, read once at start.
	JWKSFile string
	// Issuers are the accepted values of the "iss" claim.
	Issuers []string
	// Audience, when not empty, must be one of the token's "aud" values.
	Audience string
	// OrgClaim is the dotted path of the organisation id claim.
	OrgClaim string
	// UsernameClaims are the dotted paths of the user name claim; the first present wins.
	UsernameClaims []string
	// RolesClaim is the dotted path of the roles claim, an array of strings.
	RolesClaim string
	// AgentClaims are the dotted paths of the agent id claim; the first present wins.
	AgentClaims []string
	// JWKSRefreshInterval is how often the remote JWKS is fetched again.
	JWKSRefreshInterval time.Duration
	// JWKSRefreshRateLimit is the least time between refreshes that unknown key ids trigger.
	JWKSRefreshRateLimit time.Duration
	// JWKSRequestTimeout bounds one fetch of the remote JWKS.
	JWKSRequestTimeout time.Duration
	// ClockSkew is the leeway allowed when checking exp, nbf and iat.
	ClockSkew time.Duration
	// DevKeyDir, when set, holds a development signing key (created on first
	// use) whose public key is trusted, and DevIssuer is accepted.
	DevKeyDir string
	// DevIssuer is the issuer of development tokens.
	DevIssuer string
}

// DefaultConfig returns the configuration the flags default to: Keycloak's
// claim layout, no key source and no issuer.
func DefaultConfig() Config {
	return Config{
		OrgClaim:             "org_id",
		UsernameClaims:       []string{"username", "preferred_username"},
		RolesClaim:           "realm_access.roles",
		AgentClaims:          []string{"clientId", "client_id"},
		JWKSRefreshInterval:  time.Hour,
		JWKSRefreshRateLimit: time.Minute,
		JWKSRequestTimeout:   10 * time.Second,
		ClockSkew:            30 * time.Second,
		DevIssuer:            "fleet-manager-dev",
	}
}

// AddFlags registers the --auth-* flags on fs, defaulting to c's values.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.JWKSURL, "auth-jwks-url", c.JWKSURL, "http(s) URL of the identity provider's JWKS")
	fs.StringVar(&c.JWKSFile, "auth-jwks-file", c.JWKSFile, "file holding a JWKS of trusted token signing keys")
	fs.StringSliceVar(&c.Issuers, "auth-issuers", c.Issuers, "accepted token issuers (iss)")
	fs.StringVar(&c.Audience, "auth-audience", c.Audience, "required token audience (aud); empty: not checked")
	fs.StringVar(&c.OrgClaim, "auth-org-claim", c.OrgClaim, "dotted path of the organisation id claim")
	fs.StringSliceVar(&c.UsernameClaims, "auth-username-claims", c.UsernameClaims,
		"dotted paths of the user name claim; the first present wins")
	fs.StringVar(&c.RolesClaim, "auth-roles-claim", c.RolesClaim, "dotted path of the roles claim")
	fs.StringSliceVar(&c.AgentClaims, "auth-agent-claims", c.AgentClaims,
		"dotted paths of the agent id claim; the first present wins")
	fs.DurationVar(&c.JWKSRefreshInterval, "auth-jwks-refresh-interval", c.JWKSRefreshInterval,
		"how often the JWKS is fetched again")
	fs.DurationVar(&c.JWKSRefreshRateLimit, "auth-jwks-refresh-rate-limit", c.JWKSRefreshRateLimit,
		"least time between JWKS refreshes triggered by unknown key ids")
	fs.DurationVar(&c.JWKSRequestTimeout, "auth-jwks-request-timeout", c.JWKSRequestTimeout,
		"timeout of one JWKS request")
	fs.DurationVar(&c.ClockSkew, "auth-clock-skew", c.ClockSkew, "leeway when checking exp, nbf and iat")
	fs.StringVar(&c.DevKeyDir, "auth-dev-key-dir", c.DevKeyDir,
		"directory of a development signing key, created on first use and trusted (development only)")
	fs.StringVar(&c.DevIssuer, "auth-dev-issuer", c.DevIssuer, "issuer of development tokens")
}

// Validate reports every problem of c, each naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	c.validateSources(&p)
	validateClaim(&p, "auth-org-claim", c.OrgClaim)
	validateClaims(&p, "auth-username-claims", c.UsernameClaims)
	validateClaim(&p, "auth-roles-claim", c.RolesClaim)
	validateClaims(&p, "auth-agent-claims", c.AgentClaims)
	validatePositive(&p, "auth-jwks-refresh-interval", c.JWKSRefreshInterval)
	validatePositive(&p, "auth-jwks-refresh-rate-limit", c.JWKSRefreshRateLimit)
	validatePositive(&p, "auth-jwks-request-timeout", c.JWKSRequestTimeout)
	validatePositive(&p, "auth-clock-skew", c.ClockSkew)
	return p.Err()
}

// validateSources checks the key sources and the issuers that go with them.
func (c Config) validateSources(p *config.Problems) {
	if c.JWKSURL == "" && c.JWKSFile == "" && c.DevKeyDir == "" {
		p.Addf("auth-jwks-url", "a key source is required: set --auth-jwks-url, --auth-jwks-file or --auth-dev-key-dir")
	}
	if c.JWKSURL != "" {
		u, err := url.Parse(c.JWKSURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.Addf("auth-jwks-url", "%q is not an http(s) URL", c.JWKSURL)
		}
	}
	// A development-only setup trusts DevIssuer; any real key source needs its issuers.
	if len(c.Issuers) == 0 && (c.JWKSURL != "" || c.JWKSFile != "") {
		p.Addf("auth-issuers", "at least one issuer is required")
	}
	for _, iss := range c.Issuers {
		if strings.TrimSpace(iss) == "" {
			p.Addf("auth-issuers", "issuers must not be empty")
			break
		}
	}
	if c.DevKeyDir != "" && c.DevIssuer == "" {
		p.Addf("auth-dev-issuer", "must not be empty when --auth-dev-key-dir is set")
	}
}

// validateClaims checks a list of claim paths: at least one, each well formed.
func validateClaims(p *config.Problems, flag string, names []string) {
	if len(names) == 0 {
		p.Addf(flag, "at least one claim is required")
	}
	for _, name := range names {
		validateClaim(p, flag, name)
	}
}

// validateClaim checks one dotted claim path.
func validateClaim(p *config.Problems, flag, name string) {
	if name == "" {
		p.Addf(flag, "claim name must not be empty")
		return
	}
	if slices.Contains(strings.Split(name, "."), "") {
		p.Addf(flag, "claim %q has an empty path segment", name)
	}
}

// validatePositive checks that a duration flag is above zero.
func validatePositive(p *config.Problems, flag string, d time.Duration) {
	if d <= 0 {
		p.Addf(flag, "must be positive, got %s", d)
	}
}
