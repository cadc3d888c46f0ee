package onpostgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestNoStatementOfAHeartbeatOrPassGrowsWithTheBacklog onboards a backlog
// three hundred times the reconcilers' batch onto one agent hub, whose
// agent acknowledges ten revisions at a time, and has each statement the
// heartbeats and the replica's passes send explained (EXPLAIN ANALYZE, in a
// transaction rolled back) while the backlog is there: no statement may
// read more rows than a few batches, whatever the backlog. Explaining the
// statements as they run, with their values, is what the statement
// observer is for; the rows a scan read (returned, and removed by its
// filters) are what a statement costs as the table grows. The backlog is
// large enough that PostgreSQL plans a batch's statements as it would on a
// fleet (by index), not as on a small table (a scan of it all). The only
// statement allowed past the bound is the queue-depth gauge, which reads at
// most its own constant (postgres.QueueDepthBound) however large the
// backlog.
func TestNoStatementOfAHeartbeatOrPassGrowsWithTheBacklog(t *testing.T) {
	const backlog, batch, worked = 30000, 100, 1000
	e := newEnv(t)
	hub := e.hub("hub-a", "eu", "eu-1", backlog+10)
	db := pgtest.Open(t, e.cfg)
	insertRegistrations(t, e, db, backlog, "eu")
	// What autovacuum's ANALYZE does on a production server (the test
	// server may run without it): plans are made for the table as it is.
	if err := db.Gorm.Exec("ANALYZE registrations, hubs").Error; err != nil {
		t.Fatal(err)
	}

	check := newBoundCheck(t, pgtest.Open(t, e.cfg), 8*batch)
	beats := pgtest.Open(t, e.cfg)
	if err := beats.ObserveStatements(check.observe); err != nil {
		t.Fatal(err)
	}
	agentStore := postgres.NewStore(beats, testKeyring(t), fleet.SystemClock{}, e.scfg, authz.MustDefault())

	cfg := defaultReconcileConfig()
	cfg.BatchSize, cfg.TombstonePurgeBatch, cfg.DNSBatch = batch, batch, batch
	e.startReplica(replicaOptions{cfg: cfg, observe: check.observe})

	// The hub's agent: it acknowledges the hub's revision once it has moved
	// by ackEvery revisions, as an agent whose heartbeats are far apart
	// during a fast onboarding does: one acknowledgement then finishes
	// ackEvery batches (a wake-up of them all in one statement, as the
	// heartbeat once made, reads ten times the bound).
	const ackEvery = 10
	ctx, cancel := context.WithCancel(context.Background())
	var agent sync.WaitGroup
	agent.Go(func() {
		var applied int64
		for ctx.Err() == nil {
			cur, err := e.store.FindHub(ctx, hub.ID)
			if err == nil && cur.Revision >= applied+ackEvery {
				if _, err := agentStore.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity,
					fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: cur.Revision}); err == nil {
					applied = cur.Revision
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	waitCount(t, db, worked, `conditions @> '[{"type": "Delivered", "status": "True"}]'`)
	cancel()
	agent.Wait()
	check.stop()

	for _, want := range []struct{ what, sql string }{
		{"the acknowledgement's wake-up", "woken_by_ack = true"},
		{"the work queue's claim", "claimed_by = "},
		{"the heartbeat", "last_heartbeat_at = now()"},
	} {
		if !check.explained(want.sql) {
			t.Errorf("%s (a statement with %q) was never explained", want.what, want.sql)
		}
	}
	for _, v := range check.violations() {
		if strings.Contains(v.sql, "count(*) FILTER (WHERE deletion_requested_at IS NULL) AS provision") && v.rows <= postgres.QueueDepthBound+batch {
			continue // the queue-depth gauge: bounded by its own constant
		}
		t.Errorf("a statement read %d rows with a backlog of %d and batches of %d (bound %d):\n%s", v.rows, backlog, batch, check.bound, v.sql)
	}
}

// boundCheck explains the first few runs of each statement it is told of,
// on its own pool, while the test runs.
type boundCheck struct {
	t     *testing.T
	db    *postgres.DB
	bound int

	queue chan postgres.ObservedStatement
	done  sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	seen    map[string]int
	rows    map[string]int
}

// boundChecksPerStatement is how many runs of one statement are explained.
const boundChecksPerStatement = 3

func newBoundCheck(t *testing.T, db *postgres.DB, bound int) *boundCheck {
	c := &boundCheck{t: t, db: db, bound: bound, queue: make(chan postgres.ObservedStatement, 4096),
		seen: map[string]int{}, rows: map[string]int{}}
	c.done.Go(func() {
		for s := range c.queue {
			c.explain(s)
		}
	})
	return c
}

// observe is the StatementObserver: it queues the statement unless enough
// runs of it were queued already, or it is not a statement of data.
func (c *boundCheck) observe(s postgres.ObservedStatement) {
	sql := strings.TrimSpace(s.SQL)
	upper := strings.ToUpper(sql)
	for _, skip := range []string{"SET ", "RESET ", "PREPARE ", "DEALLOCATE ", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE ", "LISTEN ", "UNLISTEN "} {
		if strings.HasPrefix(upper, skip) {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.seen[sql]; n < boundChecksPerStatement && !c.stopped {
		c.seen[sql] = n + 1
		select {
		case c.queue <- s:
		default: // the checker is behind: this run goes unexplained
		}
	}
}

// explain runs s under EXPLAIN ANALYZE in a transaction it rolls back, and
// keeps the most rows any run of it read.
func (c *boundCheck) explain(s postgres.ObservedStatement) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx := c.db.Gorm.WithContext(ctx).Begin()
	defer tx.Rollback()
	// A row a pass holds is waited for briefly; a run that cannot have it
	// is left unexplained rather than hold the pass up.
	if err := tx.Exec("SET LOCAL lock_timeout = '2s'").Error; err != nil {
		return
	}
	var out []string
	if err := tx.Raw("EXPLAIN (ANALYZE, FORMAT JSON) " + c.db.Gorm.Dialector.Explain(s.SQL, s.Args...)).Scan(&out).Error; err != nil {
		c.t.Logf("not explained (%v): %s", err, s.SQL)
		return
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(strings.Join(out, "\n")), &plans); err != nil || len(plans) == 0 {
		c.t.Errorf("EXPLAIN's JSON of %s: %v", s.SQL, err)
		return
	}
	read := plans[0].Plan.rowsRead()
	c.mu.Lock()
	c.rows[strings.TrimSpace(s.SQL)] = max(c.rows[strings.TrimSpace(s.SQL)], read)
	c.mu.Unlock()
}

// stop waits for the statements queued so far to be explained.
func (c *boundCheck) stop() {
	c.mu.Lock()
	c.stopped = true
	close(c.queue)
	c.mu.Unlock()
	c.done.Wait()
}

// explained reports whether a statement containing part was explained.
func (c *boundCheck) explained(part string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sql := range c.rows {
		if strings.Contains(sql, part) {
			return true
		}
	}
	return false
}

type boundViolation struct {
	sql  string
	rows int
}

// violations are the statements that read more rows than the bound.
func (c *boundCheck) violations() []boundViolation {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []boundViolation
	for sql, rows := range c.rows {
		if rows > c.bound {
			out = append(out, boundViolation{sql: sql, rows: rows})
		}
	}
	return out
}

// planNode is a node of EXPLAIN's JSON, with what a scan read.
type planNode struct {
	NodeType             string     `json:"Node Type"`
	RelationName         string     `json:"Relation Name"`
	ActualRows           float64    `json:"Actual Rows"`
	ActualLoops          float64    `json:"Actual Loops"`
	RowsRemovedByFilter  float64    `json:"Rows Removed by Filter"`
	RowsRemovedByRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans                []planNode `json:"Plans"`
}

// rowsRead sums, over the scans of tables and indexes under n, the rows
// each returned and those its filters removed, for every loop.
func (n planNode) rowsRead() int {
	read := 0.0
	if n.RelationName != "" || strings.Contains(n.NodeType, "Index") {
		read = (n.ActualRows + n.RowsRemovedByFilter + n.RowsRemovedByRecheck) * max(n.ActualLoops, 1)
	}
	total := int(read)
	for _, child := range n.Plans {
		total += child.rowsRead()
	}
	return total
}
