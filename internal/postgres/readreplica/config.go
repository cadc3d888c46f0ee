package readreplica

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// Config is the optional read replica of the database: a streaming
// standby of the primary that serves the inventory's heavy reads (the list
// and search of managed clusters, the change feed's catch-up pages) while it
// is fresh enough (docs/database-read-replicas.md). Without a host every read
// goes to the primary.
type Config struct {
	// Host is the standby's host; empty disables the replica.
	Host string
	// Port is the standby's port.
	Port int
	// MaxStaleness is the most a read served by the replica may lag the
	// primary: past it, reads go to the primary.
	MaxStaleness time.Duration
	// CheckInterval is how often the primary's WAL position and the
	// replica's replay position are sampled. The staleness the monitor can
	// prove is never below it, so it must be well under MaxStaleness.
	CheckInterval time.Duration
}

// DefaultConfig returns the replica's defaults: disabled, with the bound a
// list's reader hardly tells from the agents' own report delay.
func DefaultConfig() Config {
	return Config{Port: 5432, MaxStaleness: 5 * time.Second, CheckInterval: 500 * time.Millisecond}
}

// Enabled reports whether a replica is configured.
func (c Config) Enabled() bool { return strings.TrimSpace(c.Host) != "" }

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Host, "db-read-replica-host", c.Host,
		"host of a streaming standby of the database that serves the inventory's heavy reads while fresh (empty: every read goes to the primary); it takes the primary's --db-name, --db-user, --db-password, --db-sslmode and pool settings")
	fs.IntVar(&c.Port, "db-read-replica-port", c.Port, "port of --db-read-replica-host")
	fs.DurationVar(&c.MaxStaleness, "db-read-max-staleness", c.MaxStaleness,
		"most a read served by --db-read-replica-host may lag the primary; past it, or when the replica does not answer, reads go to the primary")
	fs.DurationVar(&c.CheckInterval, "db-read-replica-check-interval", c.CheckInterval,
		"how often the primary's WAL position and the replica's replay position are sampled to bound the replica's staleness (at most half of --db-read-max-staleness)")
}

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	if !c.Enabled() {
		return nil
	}
	if strings.ContainsAny(c.Host, ", ") {
		p.Addf("db-read-replica-host", "must be one host (got %q)", c.Host)
	}
	if c.Port < 1 || c.Port > 65535 {
		p.Addf("db-read-replica-port", "must be between 1 and 65535 (got %d)", c.Port)
	}
	if c.MaxStaleness <= 0 {
		p.Addf("db-read-max-staleness", "must be positive (got %s)", c.MaxStaleness)
	}
	if c.CheckInterval < 10*time.Millisecond || 2*c.CheckInterval > c.MaxStaleness {
		p.Addf("db-read-replica-check-interval", "must be at least 10ms and at most half of --db-read-max-staleness %s (got %s)",
			c.MaxStaleness, c.CheckInterval)
	}
	return p.Err()
}

// DB is the replica's connection configuration: the primary's, on the
// replica's one host and port, keeping it whatever it is: a primary's
// several hosts and read-write target do not carry over.
func (c Config) DB(primary postgres.Config) postgres.Config {
	cfg := primary
	cfg.Host, cfg.Port, cfg.Ports, cfg.TargetSessionAttrs = c.Host, c.Port, nil, "any"
	return cfg
}
