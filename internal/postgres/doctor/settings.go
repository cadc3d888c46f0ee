package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Settings the service breaks under, checked by SettingsCheck. A session's
// timeouts shorter than these cut work the service expects to finish: a
// migration, a batch of creates, a purge pass, a transaction that waits on
// a lock the migration lock holds.
const (
	minStatementTimeout     = 30 * time.Second
	minIdleInTransaction    = time.Minute
	settingsFixRoleDatabase = "ALTER ROLE %s IN DATABASE %s SET %s = 0 (the service bounds its own with %s)"
)

// SettingsCheck reads the server settings the service needs, as a session
// of the doctor's role in this database gets them: the doctor sets no
// statement_timeout or idle_in_transaction_session_timeout of its own
// unless its flags ask for one, so these are the server's, the
// database's and the role's.
type SettingsCheck struct {
	Check
	Autovacuum  bool `json:"autovacuum"`
	TrackCounts bool `json:"track_counts"`
	// Each timeout in seconds; 0 is none.
	StatementTimeoutSeconds                float64 `json:"statement_timeout_seconds"`
	IdleInTransactionSessionTimeoutSeconds float64 `json:"idle_in_transaction_session_timeout_seconds"`
	IdleSessionTimeoutSeconds              float64 `json:"idle_session_timeout_seconds"`
}

func (d checker) settings(ctx context.Context) (c SettingsCheck) {
	var row struct {
		Role, Database                         string
		Autovacuum, TrackCounts                bool
		StatementMs, IdleInTxMs, IdleSessionMs float64
	}
	// pg_settings gives every timeout in milliseconds; idle_session_timeout
	// exists from PostgreSQL 14 and reads 0 before.
	err := d.db.Gorm.WithContext(ctx).Raw(`SELECT current_user AS role, current_database() AS database,
	current_setting('autovacuum')::bool AS autovacuum, current_setting('track_counts')::bool AS track_counts,
	(SELECT setting::float8 FROM pg_settings WHERE name = 'statement_timeout') AS statement_ms,
	(SELECT setting::float8 FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout') AS idle_in_tx_ms,
	coalesce((SELECT setting::float8 FROM pg_settings WHERE name = 'idle_session_timeout'), 0) AS idle_session_ms`).Scan(&row).Error
	if err != nil {
		c.failed(err)
		return c
	}
	c.Autovacuum, c.TrackCounts = row.Autovacuum, row.TrackCounts
	c.StatementTimeoutSeconds, c.IdleInTransactionSessionTimeoutSeconds, c.IdleSessionTimeoutSeconds =
		row.StatementMs/1000, row.IdleInTxMs/1000, row.IdleSessionMs/1000
	if !c.Autovacuum {
		c.problemf("autovacuum is off: the dead rows every queue update leaves are never reclaimed, the tables and their indexes " +
			"grow and the planner's statistics go stale; set autovacuum = on (ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf())")
	}
	if !c.TrackCounts {
		c.problemf("track_counts is off: autovacuum cannot tell which tables need it and this report's dead rows read 0; " +
			"set track_counts = on (ALTER SYSTEM SET track_counts = on; SELECT pg_reload_conf())")
	}
	role, database := pgx.Identifier{row.Role}.Sanitize(), pgx.Identifier{row.Database}.Sanitize()
	if ms := row.StatementMs; ms > 0 && ms < float64(minStatementTimeout.Milliseconds()) {
		c.problemf("statement_timeout is %s for this role and database: a migration, a batch of creates or a purge pass is cancelled "+
			"after it wherever --db-statement-timeout is 0; "+settingsFixRoleDatabase, time.Duration(ms)*time.Millisecond, role, database,
			"statement_timeout", "--db-statement-timeout")
	}
	if ms := row.IdleInTxMs; ms > 0 && ms < float64(minIdleInTransaction.Milliseconds()) {
		c.problemf("idle_in_transaction_session_timeout is %s for this role and database: a transaction that waits on the service "+
			"(a migration under its lock, a batch) loses its connection wherever --db-idle-in-transaction-timeout is 0; "+settingsFixRoleDatabase,
			time.Duration(ms)*time.Millisecond, role, database, "idle_in_transaction_session_timeout", "--db-idle-in-transaction-timeout")
	}
	if ms := row.IdleSessionMs; ms > 0 {
		c.problemf("idle_session_timeout is %s for this role and database: the server ends the notification listener's connection "+
			"between two notifications and the pool's idle connections, so wake-ups wait for the reconnect and requests for new "+
			"connections; %s", time.Duration(ms)*time.Millisecond,
			fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET idle_session_timeout = 0", role, database))
	}
	return c
}
