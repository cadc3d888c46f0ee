package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The doctor's checks on PostgreSQL's views. Rows of other roles' sessions
// show their query only to a superuser or a member of pg_monitor; the doctor
// then lists them without it (docs/operations-database.md).

// queryText is how much of a statement the doctor shows.
const queryText = 300

// ConnectionsCheck is the server's connections against max_connections.
type ConnectionsCheck struct {
	Check
	Max      int `json:"max_connections"`
	Reserved int `json:"superuser_reserved_connections"`
	// Used counts every client connection of the server, all databases.
	Used int `json:"used"`
	// Use is Used over Max less Reserved.
	Use           float64           `json:"use"`
	ByApplication []ConnectionGroup `json:"by_application"`
}

// ConnectionGroup is the connections of one application_name in one state.
type ConnectionGroup struct {
	ApplicationName string `json:"application_name" gorm:"column:application_name"`
	Database        string `json:"database" gorm:"column:database"`
	State           string `json:"state" gorm:"column:state"`
	Count           int    `json:"count" gorm:"column:count"`
}

func (d checker) connections(ctx context.Context) (c ConnectionsCheck) {
	tx := d.db.Gorm.WithContext(ctx)
	err := tx.Raw(`SELECT current_setting('max_connections')::int AS max, current_setting('superuser_reserved_connections')::int AS reserved`).
		Row().Scan(&c.Max, &c.Reserved)
	if err == nil {
		err = tx.Raw(`SELECT coalesce(application_name, '') AS application_name, coalesce(datname, '') AS database,
	coalesce(state, '') AS state, count(*) AS count
FROM pg_stat_activity WHERE backend_type = 'client backend'
GROUP BY 1, 2, 3 ORDER BY count(*) DESC, 1, 2, 3`).Scan(&c.ByApplication).Error
	}
	if err != nil {
		c.failed(err)
		return c
	}
	for _, g := range c.ByApplication {
		c.Used += g.Count
	}
	if usable := c.Max - c.Reserved; usable > 0 {
		c.Use = float64(c.Used) / float64(usable)
	}
	if c.Use > d.cfg.MaxConnectionUse {
		c.problemf("%d of %d usable connections in use (%.0f%%, threshold %.0f%%)", c.Used, c.Max-c.Reserved, c.Use*100, d.cfg.MaxConnectionUse*100)
	}
	return c
}

// Session is one server session as pg_stat_activity shows it.
type Session struct {
	PID             int     `json:"pid" gorm:"column:pid"`
	Database        string  `json:"database" gorm:"column:database"`
	User            string  `json:"user" gorm:"column:usename"`
	ApplicationName string  `json:"application_name" gorm:"column:application_name"`
	State           string  `json:"state" gorm:"column:state"`
	WaitEvent       string  `json:"wait_event,omitempty" gorm:"column:wait_event"`
	XactSeconds     float64 `json:"transaction_seconds" gorm:"column:xact_seconds"`
	QuerySeconds    float64 `json:"query_seconds" gorm:"column:query_seconds"`
	// Query is the session's current statement, or its last one when idle.
	Query string `json:"query" gorm:"column:query"`
}

// sessionColumns select a Session of pg_stat_activity aliased a, each
// column's name prefixed with p.
func sessionColumns(a, p string) string {
	return fmt.Sprintf(`%[1]s.pid AS %[2]spid, coalesce(%[1]s.datname, '') AS %[2]sdatabase, coalesce(%[1]s.usename, '') AS %[2]susename,
	coalesce(%[1]s.application_name, '') AS %[2]sapplication_name, coalesce(%[1]s.state, '') AS %[2]sstate,
	coalesce(%[1]s.wait_event_type || ':' || %[1]s.wait_event, '') AS %[2]swait_event,
	coalesce(extract(epoch FROM now() - %[1]s.xact_start), 0)::float8 AS %[2]sxact_seconds,
	coalesce(extract(epoch FROM now() - %[1]s.query_start), 0)::float8 AS %[2]squery_seconds,
	left(coalesce(%[1]s.query, ''), %[3]d) AS %[2]squery`, a, p, queryText)
}

// TransactionsCheck lists the transactions open longer than the threshold.
type TransactionsCheck struct {
	Check
	ThresholdSeconds float64   `json:"threshold_seconds"`
	Long             []Session `json:"long"`
}

func (d checker) transactions(ctx context.Context) (c TransactionsCheck) {
	c.ThresholdSeconds = d.cfg.LongTransaction.Seconds()
	err := d.db.Gorm.WithContext(ctx).Raw(`SELECT `+sessionColumns("a", "")+` FROM pg_stat_activity a
WHERE a.xact_start < now() - make_interval(secs => ?) AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'
ORDER BY a.xact_start`, c.ThresholdSeconds).Scan(&c.Long).Error
	if err != nil {
		c.failed(err)
		return c
	}
	for _, s := range c.Long {
		c.problemf("pid %d (%s, %s) has been in a transaction for %s (%s)", s.PID, orUnnamed(s.ApplicationName), s.State, seconds(s.XactSeconds), s.Query)
	}
	return c
}

// LockWait is a session waiting for a lock and one session it waits for.
type LockWait struct {
	Waiting  Session `json:"waiting" gorm:"embedded;embeddedPrefix:w_"`
	Blocking Session `json:"blocking" gorm:"embedded;embeddedPrefix:b_"`
}

// LockWaitsCheck lists who waits for a lock and who holds it.
type LockWaitsCheck struct {
	Check
	ThresholdSeconds float64    `json:"threshold_seconds"`
	Waits            []LockWait `json:"waits"`
}

func (d checker) lockWaits(ctx context.Context) (c LockWaitsCheck) {
	c.ThresholdSeconds = d.cfg.LockWait.Seconds()
	var rows []LockWait
	err := d.db.Gorm.WithContext(ctx).Raw(`SELECT ` + sessionColumns("w", "w_") + `, ` + sessionColumns("b", "b_") + `
FROM pg_stat_activity w
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker(pid)
JOIN pg_stat_activity b ON b.pid = blocker.pid
WHERE w.wait_event_type = 'Lock'
ORDER BY w.query_start, w.pid, b.pid`).Scan(&rows).Error
	if err != nil {
		c.failed(err)
		return c
	}
	c.Waits = rows
	for _, w := range rows {
		if w.Waiting.QuerySeconds > c.ThresholdSeconds {
			c.problemf("pid %d (%s) has waited %s for %s held by pid %d (%s, %s, in a transaction for %s: %s)",
				w.Waiting.PID, orUnnamed(w.Waiting.ApplicationName), seconds(w.Waiting.QuerySeconds), w.Waiting.WaitEvent,
				w.Blocking.PID, orUnnamed(w.Blocking.ApplicationName), w.Blocking.State, seconds(w.Blocking.XactSeconds), w.Blocking.Query)
		}
	}
	return c
}

// TableStat is a table's size, rows and maintenance.
type TableStat struct {
	Name       string `json:"name" gorm:"column:name"`
	TotalBytes int64  `json:"total_bytes" gorm:"column:total_bytes"`
	TableBytes int64  `json:"table_bytes" gorm:"column:table_bytes"`
	IndexBytes int64  `json:"index_bytes" gorm:"column:index_bytes"`
	LiveTuples int64  `json:"live_tuples" gorm:"column:live_tuples"`
	DeadTuples int64  `json:"dead_tuples" gorm:"column:dead_tuples"`
	// DeadRatio is DeadTuples over live and dead.
	DeadRatio float64 `json:"dead_ratio" gorm:"column:dead_ratio"`
	// EstimatedBloatBytes is the table's size times DeadRatio: the space
	// vacuum would make reusable, an estimate from the statistics.
	EstimatedBloatBytes int64      `json:"estimated_bloat_bytes" gorm:"column:estimated_bloat_bytes"`
	LastVacuum          *time.Time `json:"last_vacuum,omitempty" gorm:"column:last_vacuum"`
	LastAutovacuum      *time.Time `json:"last_autovacuum,omitempty" gorm:"column:last_autovacuum"`
	LastAnalyze         *time.Time `json:"last_analyze,omitempty" gorm:"column:last_analyze"`
	LastAutoanalyze     *time.Time `json:"last_autoanalyze,omitempty" gorm:"column:last_autoanalyze"`
}

// IndexStat is an index's size and use.
type IndexStat struct {
	Table string `json:"table" gorm:"column:table_name"`
	Name  string `json:"name" gorm:"column:name"`
	Bytes int64  `json:"bytes" gorm:"column:bytes"`
	Scans int64  `json:"scans" gorm:"column:scans"`
}

// TablesCheck is the database's size and its largest tables and indexes,
// with every table past the dead-row threshold.
type TablesCheck struct {
	Check
	DatabaseBytes int64       `json:"database_bytes"`
	Tables        []TableStat `json:"tables"`
	Indexes       []IndexStat `json:"indexes"`
	// Locked are the tables another session holds in ACCESS EXCLUSIVE mode
	// (a migration, a VACUUM FULL, a LOCK TABLE): measuring their size would
	// wait for it, so they are left out.
	Locked []string `json:"locked,omitempty"`
}

// exclusivelyLocked selects the relations an ACCESS EXCLUSIVE lock is held on.
const exclusivelyLocked = `SELECT l.relation FROM pg_locks l
	WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

func (d checker) tables(ctx context.Context) (c TablesCheck) {
	tx := d.db.Gorm.WithContext(ctx)
	var all []TableStat
	err := tx.Raw(`SELECT pg_database_size(current_database())`).Row().Scan(&c.DatabaseBytes)
	if err == nil {
		err = tx.Raw(`SELECT s.schemaname || '.' || s.relname AS name, pg_total_relation_size(s.relid) AS total_bytes,
	pg_table_size(s.relid) AS table_bytes, pg_indexes_size(s.relid) AS index_bytes,
	s.n_live_tup AS live_tuples, s.n_dead_tup AS dead_tuples,
	coalesce(s.n_dead_tup::float8 / nullif(s.n_live_tup + s.n_dead_tup, 0), 0) AS dead_ratio,
	(pg_table_size(s.relid) * coalesce(s.n_dead_tup::float8 / nullif(s.n_live_tup + s.n_dead_tup, 0), 0))::bigint AS estimated_bloat_bytes,
	s.last_vacuum, s.last_autovacuum, s.last_analyze, s.last_autoanalyze
FROM pg_stat_user_tables s WHERE s.relid NOT IN (` + exclusivelyLocked + `) ORDER BY total_bytes DESC, name`).Scan(&all).Error
	}
	if err == nil {
		err = tx.Raw(`SELECT s.schemaname || '.' || s.relname AS table_name, s.indexrelname AS name,
	pg_relation_size(s.indexrelid) AS bytes, s.idx_scan AS scans
FROM pg_stat_user_indexes s WHERE s.relid NOT IN (`+exclusivelyLocked+`) ORDER BY bytes DESC, name LIMIT ?`, d.cfg.Top).Scan(&c.Indexes).Error
	}
	if err == nil {
		err = tx.Raw(`SELECT s.schemaname || '.' || s.relname FROM pg_stat_user_tables s WHERE s.relid IN (` + exclusivelyLocked + `) ORDER BY 1`).
			Scan(&c.Locked).Error
	}
	if err != nil {
		c.failed(err)
		return c
	}
	for i, t := range all {
		bloated := t.DeadTuples >= d.cfg.DeadTupleMin && t.DeadRatio > d.cfg.DeadTupleRatio
		if bloated {
			c.problemf("%s: %d dead rows, %.0f%% of its rows (threshold %.0f%%); last autovacuum %s",
				t.Name, t.DeadTuples, t.DeadRatio*100, d.cfg.DeadTupleRatio*100, when(t.LastAutovacuum))
		}
		if i < d.cfg.Top || bloated {
			c.Tables = append(c.Tables, t)
		}
	}
	return c
}

// Standby is a standby streaming from this primary.
type Standby struct {
	ApplicationName  string   `json:"application_name" gorm:"column:application_name"`
	ClientAddr       string   `json:"client_addr" gorm:"column:client_addr"`
	State            string   `json:"state" gorm:"column:state"`
	SyncState        string   `json:"sync_state" gorm:"column:sync_state"`
	ReplayLagBytes   *int64   `json:"replay_lag_bytes" gorm:"column:replay_lag_bytes"`
	ReplayLagSeconds *float64 `json:"replay_lag_seconds" gorm:"column:replay_lag_seconds"`
}

// Slot is a replication slot; an inactive one keeps WAL for its consumer.
type Slot struct {
	Name          string `json:"name" gorm:"column:slot_name"`
	Type          string `json:"type" gorm:"column:slot_type"`
	Active        bool   `json:"active" gorm:"column:active"`
	RetainedBytes *int64 `json:"retained_bytes" gorm:"column:retained_bytes"`
}

// ReplicationCheck is the replicas of a primary, or the lag of a standby.
type ReplicationCheck struct {
	Check
	// Role is primary or standby.
	Role     string    `json:"role"`
	Replicas []Standby `json:"replicas,omitempty"`
	Slots    []Slot    `json:"slots,omitempty"`
	// StandbyReplayLagSeconds is, on a standby, the age of the last replayed
	// transaction when WAL received is still to replay, else 0.
	StandbyReplayLagSeconds *float64 `json:"standby_replay_lag_seconds,omitempty"`
	// StandbyReplayLagBytes is, on a standby, the WAL received not replayed yet.
	StandbyReplayLagBytes *int64 `json:"standby_replay_lag_bytes,omitempty"`
}

func (d checker) replication(ctx context.Context) (c ReplicationCheck) {
	tx := d.db.Gorm.WithContext(ctx)
	var standby bool
	if err := tx.Raw(`SELECT pg_is_in_recovery()`).Row().Scan(&standby); err != nil {
		c.failed(err)
		return c
	}
	limit := d.cfg.ReplicationLag.Seconds()
	if standby {
		c.Role = "standby"
		err := tx.Raw(`SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint,
	CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
	ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END::float8`).
			Row().Scan(&c.StandbyReplayLagBytes, &c.StandbyReplayLagSeconds)
		if err != nil {
			c.failed(err)
		} else if c.StandbyReplayLagSeconds != nil && *c.StandbyReplayLagSeconds > limit {
			c.problemf("this standby replays %s behind its primary (threshold %s)", seconds(*c.StandbyReplayLagSeconds), d.cfg.ReplicationLag)
		}
		return c
	}
	c.Role = "primary"
	err := tx.Raw(`SELECT coalesce(application_name, '') AS application_name, coalesce(host(client_addr), '') AS client_addr,
	coalesce(state, '') AS state, coalesce(sync_state, '') AS sync_state,
	pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint AS replay_lag_bytes,
	extract(epoch FROM replay_lag)::float8 AS replay_lag_seconds
FROM pg_stat_replication ORDER BY application_name`).Scan(&c.Replicas).Error
	if err == nil {
		err = tx.Raw(`SELECT slot_name, slot_type, active,
	pg_wal_lsn_diff(pg_current_wal_lsn(), coalesce(restart_lsn, confirmed_flush_lsn))::bigint AS retained_bytes
FROM pg_replication_slots ORDER BY slot_name`).Scan(&c.Slots).Error
	}
	if err != nil {
		c.failed(err)
		return c
	}
	for _, r := range c.Replicas {
		if r.ReplayLagSeconds != nil && *r.ReplayLagSeconds > limit {
			c.problemf("replica %s (%s) replays %s behind (threshold %s)", orUnnamed(r.ApplicationName), r.ClientAddr, seconds(*r.ReplayLagSeconds), d.cfg.ReplicationLag)
		}
	}
	for _, s := range c.Slots {
		if !s.Active {
			c.problemf("replication slot %s is inactive and keeps %s of WAL", s.Name, bytesOrUnknown(s.RetainedBytes))
		}
	}
	return c
}

// QueueKind is the work of one kind in the work queue.
type QueueKind struct {
	Kind string `json:"kind" gorm:"column:kind"`
	// Due is the items due and not claimed by a live lease.
	Due int64 `json:"due" gorm:"column:due"`
	// Claimed is the items a live lease holds.
	Claimed int64 `json:"claimed" gorm:"column:claimed"`
	// Retrying is the items whose last pass failed (attempts > 0).
	Retrying int64 `json:"retrying" gorm:"column:retrying"`
	// OldestDueSeconds is how long the oldest due item has waited; nil when
	// none is due.
	OldestDueSeconds *float64 `json:"oldest_due_seconds" gorm:"column:oldest_due_seconds"`
}

// QueueCheck is the work queues' depth: registrations (provision and
// deprovision, the work of provisioning_mgr and deleting_mgr) and capacity
// pools (pool_mgr's).
type QueueCheck struct {
	Check
	ThresholdSeconds float64     `json:"threshold_seconds"`
	Kinds            []QueueKind `json:"kinds"`
}

// queueSQL counts one queue table: kind is its work kind's expression, due
// the column of when an item falls due.
func queueSQL(table, kind, due string) string {
	dueNow := `(` + due + ` <= now() AND (claimed_until IS NULL OR claimed_until < now()))`
	return `SELECT ` + kind + ` AS kind, count(*) FILTER (WHERE ` + dueNow + `) AS due,
	count(*) FILTER (WHERE claimed_until >= now()) AS claimed, count(*) FILTER (WHERE attempts > 0) AS retrying,
	extract(epoch FROM now() - min(` + due + `) FILTER (WHERE ` + dueNow + `))::float8 AS oldest_due_seconds
FROM ` + table + ` WHERE deleted_at IS NULL AND ` + due + ` IS NOT NULL GROUP BY 1`
}

func (d checker) queue(ctx context.Context) (c QueueCheck) {
	c.ThresholdSeconds = d.cfg.QueueOldestDue.Seconds()
	tx := d.db.Gorm.WithContext(ctx)
	kinds := map[string]*QueueKind{}
	for _, q := range []string{
		queueSQL("registrations", `CASE WHEN deletion_requested_at IS NULL THEN 'provision' ELSE 'deprovision' END`, "next_attempt_at"),
		queueSQL("capacity_pools", `'pool'`, "next_pass_at"),
	} {
		var rows []QueueKind
		if err := tx.Raw(q).Scan(&rows).Error; err != nil {
			c.failed(err)
			return c
		}
		for _, r := range rows {
			kinds[r.Kind] = &r
		}
	}
	for _, k := range []string{"provision", "deprovision", "pool"} {
		q, ok := kinds[k]
		if !ok {
			q = &QueueKind{Kind: k}
		}
		c.Kinds = append(c.Kinds, *q)
		if q.OldestDueSeconds != nil && *q.OldestDueSeconds > c.ThresholdSeconds {
			c.problemf("%s work: %d items due, the oldest waiting %s (threshold %s)", k, q.Due, seconds(*q.OldestDueSeconds), d.cfg.QueueOldestDue)
		}
	}
	return c
}

// StatementStat is a statement of pg_stat_statements.
type StatementStat struct {
	QueryID      int64   `json:"queryid" gorm:"column:queryid"`
	Calls        int64   `json:"calls" gorm:"column:calls"`
	TotalSeconds float64 `json:"total_seconds" gorm:"column:total_seconds"`
	MeanSeconds  float64 `json:"mean_seconds" gorm:"column:mean_seconds"`
	Rows         int64   `json:"rows" gorm:"column:rows"`
	// Query is the normalised text pg_stat_statements keeps: the first one
	// it saw, with that call's operation comment.
	Query string `json:"query" gorm:"column:query"`
}

// StatementsCheck is the statements of this database that took the most
// time, from pg_stat_statements when the extension is installed.
type StatementsCheck struct {
	Check
	Installed bool            `json:"installed"`
	Note      string          `json:"note,omitempty"`
	Top       []StatementStat `json:"top,omitempty"`
}

// errNoStatements is the note of a database without pg_stat_statements.
var errNoStatements = errors.New("pg_stat_statements is not installed in this database: " +
	"add it to shared_preload_libraries, restart, and CREATE EXTENSION pg_stat_statements")

func (d checker) statements(ctx context.Context) (c StatementsCheck) {
	tx := d.db.Gorm.WithContext(ctx)
	var schema *string
	if err := tx.Raw(`SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_stat_statements'`).Scan(&schema).Error; err != nil {
		c.failed(err)
		return c
	}
	if schema == nil {
		c.Note = errNoStatements.Error()
		return c
	}
	c.Installed = true
	view := pgx.Identifier{*schema, "pg_stat_statements"}.Sanitize()
	err := tx.Raw(`SELECT queryid, calls, total_exec_time / 1000 AS total_seconds, mean_exec_time / 1000 AS mean_seconds, rows,
	left(query, `+fmt.Sprint(queryText)+`) AS query
FROM `+view+` WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT ?`, d.cfg.Top).Scan(&c.Top).Error
	if err != nil {
		// Installed but not preloaded: the view refuses to answer. Said, not
		// counted, as a missing extension is.
		c.Note = fmt.Sprintf("pg_stat_statements is installed but cannot be read: %v", err)
		return c
	}
	limit := d.cfg.SlowStatementMean.Seconds()
	for _, s := range c.Top {
		if s.MeanSeconds > limit {
			c.problemf("statement %d takes %s on average over %d calls (threshold %s): %s", s.QueryID, seconds(s.MeanSeconds), s.Calls, d.cfg.SlowStatementMean, s.Query)
		}
	}
	return c
}

// orUnnamed is an application_name for a sentence.
func orUnnamed(name string) string {
	if name == "" {
		return "no application_name"
	}
	return name
}

// seconds is a number of seconds as a duration, to the millisecond.
func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// when is a time of the statistics, or never.
func when(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// bytesOrUnknown is a size the server may not know.
func bytesOrUnknown(b *int64) string {
	if b == nil {
		return "an unknown amount"
	}
	return fmt.Sprintf("%d bytes", *b)
}
