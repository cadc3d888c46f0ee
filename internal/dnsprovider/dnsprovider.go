// Package dnsprovider writes service instances' DNS records to the zones'
// providers and reads them back from authoritative servers: RFC 2136
// dynamic updates signed with TSIG (github.com/miekg/dns), Amazon Route53
// (the AWS SDK for Go v2), and a non-recursive resolver. It implements
// fleet.DNSProvider and fleet.DNSResolver; dns_mgr drives them.
package dnsprovider

import (
	"strings"
	"time"

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
