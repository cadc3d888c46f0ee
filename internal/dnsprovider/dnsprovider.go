// Package dnsprovider writes service instances' DNS records to the zones'
// providers and reads them back from authoritative servers: RFC 2136
// dynamic updates signed with TSIG (github.com/miekg/dns), Amazon Route53
// (the AWS SDK for Go v2), and a non-recursive resolver. It implements
// fleet.DNSProvider and fleet.DNSResolver; dns_mgr drives them.
package dnsprovider

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Defaults of Config's zero fields.
const (
	DefaultDNSTimeout         = 5 * time.Second
	DefaultRoute53MaxAttempts = 5
	DefaultRoute53MaxBackoff  = 20 * time.Second
	DefaultRoute53Timeout     = 30 * time.Second
	DefaultRoute53Region      = "us-east-1"
)

// Config tunes the providers and the resolver; zero fields take the
// defaults.
type Config struct {
	// DNSTimeout bounds one DNS exchange: an RFC 2136 update, or one query
	// of the resolver (UDP, then TCP when truncated).
	DNSTimeout time.Duration
	// Route53MaxAttempts bounds the AWS SDK's attempts of one Route53 call
	// (its standard retryer: throttling, 5xx and network errors).
	Route53MaxAttempts int
	// Route53MaxBackoff bounds the standard retryer's delay between two
	// attempts.
	Route53MaxBackoff time.Duration
	// Route53Timeout bounds one HTTP attempt of a Route53 call, so that a
	// connection that hangs becomes a retried error.
	Route53Timeout time.Duration
	// OwnerID names this deployment in the ownership records beside the
	// names it writes (ownership.go): names another owner id holds are
	// never written. Empty: the service name (serve fills it in), or
	// DefaultOwnerID.
	OwnerID string
}

// DefaultConfig returns the defaults, as the flags show them: the owner id
// empty, for serve to fill in from the service name.
func DefaultConfig() Config {
	c := Config{}.defaulted()
	c.OwnerID = ""
	return c
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.DNSTimeout, "dns-timeout", c.DNSTimeout,
		"bound of one DNS exchange: an RFC 2136 update, or one query of an authoritative server")
	fs.IntVar(&c.Route53MaxAttempts, "dns-route53-max-attempts", c.Route53MaxAttempts,
		"attempts of one Route53 call by the AWS SDK's retryer (throttling, 5xx and network errors)")
	fs.DurationVar(&c.Route53MaxBackoff, "dns-route53-max-backoff", c.Route53MaxBackoff, "longest wait between two attempts of a Route53 call")
	fs.DurationVar(&c.Route53Timeout, "dns-route53-timeout", c.Route53Timeout, "bound of one HTTP attempt of a Route53 call")
	fs.StringVar(&c.OwnerID, "dns-owner-id", c.OwnerID,
		"this deployment's name in the ownership records beside the DNS names it writes; names another owner id holds are never written (default: --service-name)")
}

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	for flag, d := range map[string]time.Duration{"dns-timeout": c.DNSTimeout, "dns-route53-max-backoff": c.Route53MaxBackoff,
		"dns-route53-timeout": c.Route53Timeout} {
		if d <= 0 {
			p.Addf(flag, "must be positive (got %s)", d)
		}
	}
	if c.Route53MaxAttempts < 1 || c.Route53MaxAttempts > 20 {
		p.Addf("dns-route53-max-attempts", "must be between 1 and 20 (got %d)", c.Route53MaxAttempts)
	}
	if c.OwnerID != "" && !ownerIDPattern.MatchString(c.OwnerID) {
		p.Addf("dns-owner-id", "must be 1 to 63 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit")
	}
	return p.Err()
}

func (c Config) defaulted() Config {
	if c.DNSTimeout <= 0 {
		c.DNSTimeout = DefaultDNSTimeout
	}
	if c.Route53MaxAttempts <= 0 {
		c.Route53MaxAttempts = DefaultRoute53MaxAttempts
	}
	if c.Route53MaxBackoff <= 0 {
		c.Route53MaxBackoff = DefaultRoute53MaxBackoff
	}
	if c.Route53Timeout <= 0 {
		c.Route53Timeout = DefaultRoute53Timeout
	}
	if c.OwnerID == "" {
		c.OwnerID = DefaultOwnerID
	}
	return c
}

// New returns a provider of each kind (fleet.DNSProviderKinds).
func New(cfg Config) map[fleet.DNSProviderKind]fleet.DNSProvider {
	return map[fleet.DNSProviderKind]fleet.DNSProvider{
		fleet.DNSProviderRFC2136: NewRFC2136(cfg),
		fleet.DNSProviderRoute53: NewRoute53(cfg),
	}
}

// redact removes every non-empty secret from a message, so that an error
// the provider's answer or the SDK builds never carries a credential.
func redact(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}
