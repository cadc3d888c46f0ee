package postgres

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// defaultDNSResync is --dns-cluster-resync's default: a cluster's URL is
// known long before anyone resolves its instances' names.
const defaultDNSResync = 5 * time.Minute

// minDNSResync bounds --dns-cluster-resync from below: every resync of
// every record that follows a cluster is a pass over its zone.
const minDNSResync = 10 * time.Second

// addDNSFlags binds how DNS records are kept.
func (c *StoreConfig) addDNSFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.DNSResync, "dns-cluster-resync", c.DNSResync,
		"how long after its pass a DNS record that follows a pool cluster is checked again, so it follows the cluster's ingress")
}

// validateDNS checks the DNS settings, naming their flags.
func (c StoreConfig) validateDNS(p *config.Problems) {
	if c.DNSResync < minDNSResync {
		p.Addf("dns-cluster-resync", "must be at least %s (got %s)", minDNSResync, c.DNSResync)
	}
}
