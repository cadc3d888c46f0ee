// Package doctor is what an operator asks the database when the service
// misbehaves, `fleet-manager doctor` (docs/operations-database.md). Each
// check reads PostgreSQL's own views and the service's tables, compares what
// it read with a threshold of Config, and says what is past it as a problem.
// A check that cannot run (a view the role may not read) says why and counts
// as a problem: the operator must not take silence for health.
// pg_stat_statements missing is said, not counted: the service does not need
// it.
package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
)

// Config is the thresholds past which a check reports a problem.
type Config struct {
	// MaxConnectionUse is the share of max_connections (less the reserved
	// ones) in use past which connections are a problem.
	MaxConnectionUse float64
	// LongTransaction is the age past which an open transaction is a problem.
	LongTransaction time.Duration
	// LockWait is the wait for a lock past which a waiting statement is a problem.
	LockWait time.Duration
	// DeadTupleRatio is the share of dead rows of a table past which it is a
	// problem, once it has at least DeadTupleMin dead rows.
	DeadTupleRatio float64
	// DeadTupleMin keeps small tables out of the dead-row check.
	DeadTupleMin int64
	// ReplicationLag is the replay lag past which a replica (or this
	// standby) is a problem.
	ReplicationLag time.Duration
	// QueueOldestDue is how long the oldest due work item may wait unclaimed.
	QueueOldestDue time.Duration
	// SlowStatementMean is the mean execution time past which a statement of
	// pg_stat_statements is a problem.
	SlowStatementMean time.Duration
	// Top is how many tables, indexes and statements are listed.
	Top int
}

// DefaultConfig returns thresholds for the service's defaults
// (statement_timeout, idle_in_transaction_session_timeout, the reconcilers'
// resync).
func DefaultConfig() Config {
	return Config{
		MaxConnectionUse:  0.8,
		LongTransaction:   time.Minute,
		LockWait:          10 * time.Second,
		DeadTupleRatio:    0.2,
		DeadTupleMin:      10_000,
		ReplicationLag:    30 * time.Second,
		QueueOldestDue:    5 * time.Minute,
		SlowStatementMean: 500 * time.Millisecond,
		Top:               10,
	}
}

// AddFlags binds the thresholds to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&c.MaxConnectionUse, "max-connection-use", c.MaxConnectionUse, "share of max_connections in use past which connections are a problem (0 to 1)")
	fs.DurationVar(&c.LongTransaction, "long-transaction", c.LongTransaction, "age past which an open transaction is a problem")
	fs.DurationVar(&c.LockWait, "lock-wait", c.LockWait, "wait for a lock past which a statement is a problem")
	fs.Float64Var(&c.DeadTupleRatio, "dead-tuple-ratio", c.DeadTupleRatio, "share of dead rows past which a table is a problem (0 to 1)")
	fs.Int64Var(&c.DeadTupleMin, "dead-tuple-min", c.DeadTupleMin, "dead rows a table needs before its share counts")
	fs.DurationVar(&c.ReplicationLag, "replication-lag", c.ReplicationLag, "replay lag past which a replica is a problem")
	fs.DurationVar(&c.QueueOldestDue, "queue-oldest-due", c.QueueOldestDue, "wait of the oldest due work item past which the queue is a problem")
	fs.DurationVar(&c.SlowStatementMean, "slow-statement-mean", c.SlowStatementMean, "mean execution time past which a statement of pg_stat_statements is a problem")
	fs.IntVar(&c.Top, "top", c.Top, "how many tables, indexes and statements to list")
}

// Validate reports every invalid threshold, naming its flag.
func (c Config) Validate() error {
	var p config.Problems
	for flag, v := range map[string]float64{"max-connection-use": c.MaxConnectionUse, "dead-tuple-ratio": c.DeadTupleRatio} {
		if v <= 0 || v > 1 {
			p.Addf(flag, "must be above 0 and at most 1 (got %g)", v)
		}
	}
	for flag, d := range map[string]time.Duration{"long-transaction": c.LongTransaction, "lock-wait": c.LockWait,
		"replication-lag": c.ReplicationLag, "queue-oldest-due": c.QueueOldestDue, "slow-statement-mean": c.SlowStatementMean} {
		if d <= 0 {
			p.Addf(flag, "must be positive (got %s)", d)
		}
	}
	if c.DeadTupleMin < 0 {
		p.Addf("dead-tuple-min", "must not be negative (got %d)", c.DeadTupleMin)
	}
	if c.Top < 1 {
		p.Addf("top", "must be at least 1 (got %d)", c.Top)
	}
	return p.Err()
}

// Report is what the doctor found. Every duration is in seconds, every size
// in bytes.
type Report struct {
	Database      string    `json:"database"`
	ServerVersion string    `json:"server_version"`
	CheckedAt     time.Time `json:"checked_at"`

	Schema       SchemaCheck       `json:"schema"`
	Settings     SettingsCheck     `json:"settings"`
	Connections  ConnectionsCheck  `json:"connections"`
	Transactions TransactionsCheck `json:"transactions"`
	LockWaits    LockWaitsCheck    `json:"lock_waits"`
	Tables       TablesCheck       `json:"tables"`
	Replication  ReplicationCheck  `json:"replication"`
	Queue        QueueCheck        `json:"queue"`
	Statements   StatementsCheck   `json:"statements"`
}

// Check is what every check reports beside its findings: the problems past
// a threshold, and the error that kept it from running.
type Check struct {
	Problems []string `json:"problems,omitempty"`
	Error    string   `json:"error,omitempty"`
}

func (c *Check) problemf(format string, args ...any) {
	c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
}

// failed records the error that kept the check from running, as a problem.
func (c *Check) failed(err error) {
	c.Error = err.Error()
	c.problemf("the check could not run: %v", err)
}

// Finding is one problem of a report, with the check that found it.
type Finding struct {
	Check   string `json:"check"`
	Problem string `json:"problem"`
}

// Problems lists every check's problems, in the report's order.
func (r Report) Problems() []Finding {
	var out []Finding
	for _, c := range []struct {
		name  string
		check Check
	}{
		{"schema", r.Schema.Check}, {"settings", r.Settings.Check}, {"connections", r.Connections.Check}, {"transactions", r.Transactions.Check},
		{"lock_waits", r.LockWaits.Check}, {"tables", r.Tables.Check}, {"replication", r.Replication.Check},
		{"queue", r.Queue.Check}, {"statements", r.Statements.Check},
	} {
		for _, p := range c.check.Problems {
			out = append(out, Finding{Check: c.name, Problem: p})
		}
	}
	return out
}

// Run runs every check on the database. It fails only when the database
// does not answer; a check that fails is reported in its section. Each
// check runs in its own statements, outside a transaction, so the doctor
// holds no snapshot that would itself hold back vacuum.
func Run(ctx context.Context, db *postgres.DB, cfg Config) (Report, error) {
	r := Report{Database: db.Name(), CheckedAt: time.Now().UTC()}
	if err := db.Ping(ctx); err != nil {
		return r, fmt.Errorf("Doctor(%s): %w", db.Name(), err)
	}
	if err := db.Gorm.WithContext(ctx).Raw(`SELECT current_setting('server_version')`).Scan(&r.ServerVersion).Error; err != nil {
		return r, fmt.Errorf("Doctor(%s): %w", db.Name(), err)
	}
	d := checker{db: db, cfg: cfg}
	r.Schema = d.schema(ctx)
	r.Settings = d.settings(ctx)
	r.Connections = d.connections(ctx)
	r.Transactions = d.transactions(ctx)
	r.LockWaits = d.lockWaits(ctx)
	r.Tables = d.tables(ctx)
	r.Replication = d.replication(ctx)
	r.Queue = d.queue(ctx)
	r.Statements = d.statements(ctx)
	return r, nil
}

// checker runs the checks of one report.
type checker struct {
	db  *postgres.DB
	cfg Config
}

// SchemaCheck compares the applied migrations with the binary's.
type SchemaCheck struct {
	Check
	Applied int      `json:"applied"`
	Known   int      `json:"known"`
	Latest  string   `json:"latest,omitempty"`
	Missing []string `json:"missing,omitempty"`
	Unknown []string `json:"unknown,omitempty"`
	// State is current, behind (the binary knows migrations the database
	// lacks: run migrate) or ahead (a newer binary migrated: fine during a
	// rolling upgrade).
	State string `json:"state"`
}

func (d checker) schema(ctx context.Context) (c SchemaCheck) {
	status, err := d.db.SchemaStatus(ctx)
	if err != nil {
		c.failed(err)
		return c
	}
	c.Applied, c.Known, c.Missing, c.Unknown = len(status.Applied), len(migrations.IDs()), status.Missing, status.Unknown
	if n := len(status.Applied); n > 0 {
		c.Latest = status.Applied[n-1]
	}
	switch {
	case !status.Current():
		c.State = "behind"
		c.problemf("the schema lacks %d migrations this binary knows (%s first): run `fleet-manager migrate`", len(status.Missing), status.Missing[0])
	case len(status.Unknown) > 0:
		c.State = "ahead"
	default:
		c.State = "current"
	}
	return c
}
