package postgres

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// Config is the database connection and pool configuration.
type Config struct {
	// Host is one host, or several separated by commas (the members of a
	// Patroni cluster): a connection tries them in order and keeps the
	// first that TargetSessionAttrs accepts.
	Host string
	// Port is the port of every host; Ports, when set, gives each host of
	// Host its own, in the same order (--db-port=5432,5433).
	Port  int
	Ports []int
	// TargetSessionAttrs is libpq's target_session_attrs: which of the
	// hosts a connection keeps (any, read-write, read-only, primary,
	// standby, prefer-standby). Empty means read-write when Host lists
	// several hosts, so the pool follows the primary, and any otherwise.
	TargetSessionAttrs string
	Name               string
	User               string
	Password           string
	SSLMode            string
	SSLRootCert        string
	// IAM signs in with RDS IAM authentication tokens instead of Password (iam.go).
	IAM IAMAuth
	// Passwords, when set, gives every new connection its password (tests; --db-iam-auth sets RDS tokens).
	Passwords PasswordFunc

	// ConnectTimeout bounds opening one connection.
	ConnectTimeout time.Duration
	// MaxOpenConns caps the pool; PostgreSQL's max_connections is shared by every replica.
	MaxOpenConns int
	// MaxIdleConns is how many idle connections the pool keeps.
	MaxIdleConns int
	// ConnMaxLifetime recycles connections, so a fail-over or a DNS change is picked up.
	ConnMaxLifetime time.Duration
	// ConnMaxIdleTime closes connections idle for longer.
	ConnMaxIdleTime time.Duration
	// WaitTimeout bounds a request's wait for the database: for a pooled
	// connection, opening one, and each statement's answer, when the
	// request's context asks for it (fleet.BoundedDatabaseWait; wait.go).
	// Past it the request fails as unavailability: a database that stops
	// answering is answered 503 well within the request's deadline.
	WaitTimeout time.Duration
	// StatementTimeout is the server's bound on one statement
	// (statement_timeout); 0 leaves it unbounded. A statement past it fails
	// as unavailability, so a stuck database answers 503, not a hang.
	StatementTimeout time.Duration
	// LockTimeout bounds the wait for one lock (lock_timeout); 0 waits forever.
	LockTimeout time.Duration
	// IdleInTransactionTimeout ends a session idle inside a transaction for
	// longer (idle_in_transaction_session_timeout), so a stuck client cannot
	// hold its locks; 0 never ends it.
	IdleInTransactionTimeout time.Duration
	// Debug logs every SQL statement.
	Debug bool
	// SlowThreshold logs statements slower than this as warnings; 0 disables.
	SlowThreshold time.Duration
	// ApplicationName names the component in pg_stat_activity (application_name).
	ApplicationName string
}

// DefaultConfig returns the configuration of a local development database.
func DefaultConfig() Config {
	return Config{
		Host:            "127.0.0.1",
		Port:            5432,
		Name:            "fleet_manager",
		User:            "postgres",
		SSLMode:         "disable",
		ConnectTimeout:  5 * time.Second,
		WaitTimeout:     5 * time.Second,
		MaxOpenConns:    20,
		MaxIdleConns:    20,
		ConnMaxLifetime: 30 * time.Minute,
		ConnMaxIdleTime: 5 * time.Minute,
		SlowThreshold:   time.Second,

		// No lock_timeout by default: statement_timeout bounds lock waits
		// too, and a start (migrations, counted labels) may wait for another
		// replica's longer than a request would.
		StatementTimeout:         30 * time.Second,
		IdleInTransactionTimeout: time.Minute,
	}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Host, "db-host", c.Host, "database host, or several separated by commas (tried in order; see --db-target-session-attrs)")
	fs.Var((*portsValue)(c), "db-port", "database port of every host, or one per host of --db-host separated by commas")
	fs.StringVar(&c.TargetSessionAttrs, "db-target-session-attrs", c.TargetSessionAttrs,
		"which host a connection keeps: any, read-write, read-only, primary, standby or prefer-standby (default: read-write with several hosts, else any)")
	fs.StringVar(&c.Name, "db-name", c.Name, "database name")
	fs.StringVar(&c.User, "db-user", c.User, "database user")
	fs.StringVar(&c.Password, "db-password", c.Password, "database password (prefer the secrets directory's db.password)")
	fs.StringVar(&c.SSLMode, "db-sslmode", c.SSLMode, "libpq sslmode: disable, allow, prefer, require, verify-ca or verify-full")
	fs.StringVar(&c.SSLRootCert, "db-sslrootcert", c.SSLRootCert, "CA bundle file for verify-ca/verify-full (e.g. the RDS bundle)")
	c.IAM.addFlags(fs)
	fs.DurationVar(&c.ConnectTimeout, "db-connect-timeout", c.ConnectTimeout, "timeout for opening one database connection")
	fs.DurationVar(&c.WaitTimeout, "db-wait-timeout", c.WaitTimeout,
		"longest an API request waits for a database connection or a statement's answer before it is answered 503 (the long-polls and batch endpoints keep --api-request-timeout)")
	fs.IntVar(&c.MaxOpenConns, "db-max-open-conns", c.MaxOpenConns, "maximum open connections in the pool")
	fs.IntVar(&c.MaxIdleConns, "db-max-idle-conns", c.MaxIdleConns, "maximum idle connections in the pool")
	fs.DurationVar(&c.ConnMaxLifetime, "db-conn-max-lifetime", c.ConnMaxLifetime, "maximum lifetime of a pooled connection")
	fs.DurationVar(&c.ConnMaxIdleTime, "db-conn-max-idle-time", c.ConnMaxIdleTime, "maximum idle time of a pooled connection")
	fs.DurationVar(&c.StatementTimeout, "db-statement-timeout", c.StatementTimeout, "longest a statement may run before the server cancels it (statement_timeout; 0: no limit)")
	fs.DurationVar(&c.LockTimeout, "db-lock-timeout", c.LockTimeout, "longest a statement may wait for a lock (lock_timeout; 0: no limit)")
	fs.DurationVar(&c.IdleInTransactionTimeout, "db-idle-in-transaction-timeout", c.IdleInTransactionTimeout,
		"how long a session may sit idle inside a transaction before the server ends it (idle_in_transaction_session_timeout; 0: no limit)")
	fs.BoolVar(&c.Debug, "db-debug", c.Debug, "log every SQL statement")
	fs.DurationVar(&c.SlowThreshold, "db-slow-threshold", c.SlowThreshold, "log statements slower than this as warnings (0 disables)")
}

// SecretFiles lists the files of a secrets directory that set database flags,
// named as the factorized template's secrets are.
func SecretFiles() []config.SecretFile {
	return []config.SecretFile{
		{Flag: "db-host", File: "db.host"},
		{Flag: "db-port", File: "db.port"},
		{Flag: "db-target-session-attrs", File: "db.target_session_attrs"},
		{Flag: "db-name", File: "db.name"},
		{Flag: "db-user", File: "db.user"},
		{Flag: "db-password", File: "db.password"},
		{Flag: "db-sslmode", File: "db.sslmode"},
		{Flag: "db-sslrootcert", File: "db.sslrootcert"},
	}
}

// Validate reports every invalid setting, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	hosts := c.hosts()
	if len(hosts) == 0 {
		p.Addf("db-host", "is required")
	}
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, " /?#@") {
			p.Addf("db-host", "must be host names or addresses separated by commas (got %q)", c.Host)
			break
		}
	}
	for _, port := range append([]int{c.Port}, c.Ports...) {
		if port < 1 || port > 65535 {
			p.Addf("db-port", "must be between 1 and 65535 (got %d)", port)
			break
		}
	}
	if len(c.Ports) > 1 && len(hosts) > 0 && len(c.Ports) != len(hosts) {
		p.Addf("db-port", "lists %d ports for %d hosts of --db-host: give one port for all or one per host", len(c.Ports), len(hosts))
	}
	switch c.TargetSessionAttrs {
	case "", "any", "read-write", "read-only", "primary", "standby", "prefer-standby":
	default:
		p.Addf("db-target-session-attrs", "must be one of any, read-write, read-only, primary, standby, prefer-standby (got %q)", c.TargetSessionAttrs)
	}
	if strings.TrimSpace(c.Name) == "" {
		p.Addf("db-name", "is required")
	}
	if strings.TrimSpace(c.User) == "" {
		p.Addf("db-user", "is required")
	}
	switch c.SSLMode {
	case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
	default:
		p.Addf("db-sslmode", "must be one of disable, allow, prefer, require, verify-ca, verify-full (got %q)", c.SSLMode)
	}
	c.IAM.validate(c, &p)
	if c.ConnectTimeout <= 0 {
		p.Addf("db-connect-timeout", "must be positive (got %s)", c.ConnectTimeout)
	}
	if c.WaitTimeout <= 0 {
		p.Addf("db-wait-timeout", "must be positive (got %s)", c.WaitTimeout)
	}
	if c.MaxOpenConns < 1 {
		p.Addf("db-max-open-conns", "must be at least 1 (got %d)", c.MaxOpenConns)
	}
	if c.MaxIdleConns < 0 || c.MaxIdleConns > c.MaxOpenConns {
		p.Addf("db-max-idle-conns", "must be between 0 and --db-max-open-conns (%d) (got %d)", c.MaxOpenConns, c.MaxIdleConns)
	}
	if c.ConnMaxLifetime < 0 {
		p.Addf("db-conn-max-lifetime", "must not be negative (got %s)", c.ConnMaxLifetime)
	}
	if c.ConnMaxIdleTime < 0 {
		p.Addf("db-conn-max-idle-time", "must not be negative (got %s)", c.ConnMaxIdleTime)
	}
	for flag, d := range map[string]time.Duration{
		"db-statement-timeout": c.StatementTimeout, "db-lock-timeout": c.LockTimeout,
		"db-idle-in-transaction-timeout": c.IdleInTransactionTimeout,
	} {
		if d < 0 || d%time.Millisecond != 0 {
			p.Addf(flag, "must be 0 or a positive number of milliseconds (got %s)", d)
		}
	}
	return p.Err()
}

// DSN returns the connection string in URL form; the password is escaped.
func (c Config) DSN() string {
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(c.User, c.Password),
		Host:   c.hostPorts(),
		Path:   "/" + c.Name,
	}
	if c.Password == "" {
		u.User = url.User(c.User)
	}
	q := url.Values{}
	q.Set("sslmode", c.SSLMode)
	// libpq takes whole seconds, and 0 would mean "wait forever".
	q.Set("connect_timeout", fmt.Sprint(max(1, int((c.ConnectTimeout+time.Second-1)/time.Second))))
	if c.SSLRootCert != "" {
		q.Set("sslrootcert", c.SSLRootCert)
	}
	if tsa := c.targetSessionAttrs(); tsa != "any" {
		q.Set("target_session_attrs", tsa)
	}
	// pgx prepares every statement; after five runs PostgreSQL may keep a
	// generic plan, blind to the values. For the inventory's searches that
	// plan can be orders of magnitude slower (docs/performance.md), so every
	// statement is planned with its values. A runtime parameter, sent at connect.
	q.Set("plan_cache_mode", "force_custom_plan")
	// Runtime parameters too: every connection of the pool, and the
	// listener's, gets them at connect, in milliseconds.
	for param, d := range map[string]time.Duration{
		"statement_timeout": c.StatementTimeout, "lock_timeout": c.LockTimeout,
		"idle_in_transaction_session_timeout": c.IdleInTransactionTimeout,
	} {
		if d > 0 {
			q.Set(param, fmt.Sprint(d.Milliseconds()))
		}
	}
	if c.ApplicationName != "" {
		q.Set("application_name", c.ApplicationName)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// hosts returns the hosts of Host, trimmed.
func (c Config) hosts() []string {
	if strings.TrimSpace(c.Host) == "" {
		return nil
	}
	hosts := strings.Split(c.Host, ",")
	for i, h := range hosts {
		hosts[i] = strings.TrimSpace(h)
	}
	return hosts
}

// hostPorts is the host part of the DSN: "h1:p1,h2:p2". An IPv6 address
// is bracketed.
func (c Config) hostPorts() string {
	hosts := c.hosts()
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		port := c.Port
		if len(c.Ports) > 1 && i < len(c.Ports) {
			port = c.Ports[i]
		}
		parts[i] = net.JoinHostPort(h, strconv.Itoa(port))
	}
	return strings.Join(parts, ",")
}

// targetSessionAttrs resolves the default of TargetSessionAttrs.
func (c Config) targetSessionAttrs() string {
	switch {
	case c.TargetSessionAttrs != "":
		return c.TargetSessionAttrs
	case len(c.hosts()) > 1:
		return "read-write"
	default:
		return "any"
	}
}

// portsValue is --db-port: one port (Port) or a comma list (Ports, and its
// first in Port).
type portsValue Config

func (v *portsValue) String() string {
	if len(v.Ports) > 1 {
		s := make([]string, len(v.Ports))
		for i, p := range v.Ports {
			s[i] = strconv.Itoa(p)
		}
		return strings.Join(s, ",")
	}
	return strconv.Itoa(v.Port)
}

func (v *portsValue) Set(s string) error {
	var ports []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("port %q: not a number", strings.TrimSpace(f))
		}
		ports = append(ports, p)
	}
	v.Port, v.Ports = ports[0], nil
	if len(ports) > 1 {
		v.Ports = ports
	}
	return nil
}

func (v *portsValue) Type() string { return "ports" }
