package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	domain "github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// plan is the EXPLAIN (ANALYZE, BUFFERS) of one statement a scenario ran.
type plan struct {
	scenario string
	settings []string // the SET LOCAL statements the store ran before it, in its transaction
	sql      string
	lines    []string
	seqScans []string // the plan's Seq Scan nodes on the inventory tables
}

// inventorySeqScan matches a sequential scan of the tables the targets name.
var inventorySeqScan = regexp.MustCompile(`Seq Scan on (managed_clusters|resources)\b`)

// statementRecorder keeps the statements the store runs, as its
// postgres.StatementObserver.
type statementRecorder struct {
	mu    sync.Mutex
	stmts []postgres.ObservedStatement
}

func (r *statementRecorder) observe(s postgres.ObservedStatement) {
	r.mu.Lock()
	r.stmts = append(r.stmts, s)
	r.mu.Unlock()
}

// take returns the statements recorded since the last take.
func (r *statementRecorder) take() []postgres.ObservedStatement {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stmts
	r.stmts = nil
	return s
}

// boundSQL is s with its values written in as literals, as GORM's dialect
// writes them, to explain and to print.
func boundSQL(pg *postgres.DB, s postgres.ObservedStatement) string {
	return pg.Gorm.Dialector.Explain(s.SQL, s.Args...)
}

// executeGeneric is the EXECUTE of s prepared as "generic", with its values
// written in as literals.
func executeGeneric(pg *postgres.DB, s postgres.ObservedStatement) string {
	if len(s.Args) == 0 {
		return "EXECUTE generic"
	}
	params := make([]string, len(s.Args))
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	return pg.Gorm.Dialector.Explain("EXECUTE generic("+strings.Join(params, ", ")+")", s.Args...)
}

// changeLister is the change feed's store method, when the tree has it.
type changeLister interface {
	ListManagedClusterChanges(ctx context.Context, caller domain.Identity, admin bool, after string, size int) (domain.ChangePage, error)
}

// explainReads runs the store functions the server ran for each scenario,
// in this process with a statement observer that records their SQL and
// values, and explains every statement.
func explainReads(ctx context.Context, o options, db *benchDB, scenarios []readScenario) ([]plan, error) {
	cfg := postgres.DefaultConfig()
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Name = o.DB.Host, o.DB.Port, o.DB.User, o.DB.Password, db.name
	cfg.MaxOpenConns = 2
	pg, err := postgres.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, fmt.Errorf("explainReads: %w", err)
	}
	defer pg.Close()
	rec := &statementRecorder{}
	if err := pg.ObserveStatements(rec.observe); err != nil {
		return nil, fmt.Errorf("explainReads: %w", err)
	}
	store := postgres.NewStore(pg, nil, domain.SystemClock{}, postgres.StoreConfig{MaxPageSize: 500}, authz.MustDefault())
	var id string
	if err := db.conn.QueryRow(ctx, `SELECT id FROM managed_clusters WHERE deleted_at IS NULL ORDER BY name DESC LIMIT 1`).Scan(&id); err != nil {
		return nil, err
	}
	var plans []plan
	for _, sc := range scenarios {
		caller, admin := domain.Identity{OrgID: "sre", Username: "bench-reader"}, true
		if sc.org {
			caller, admin = domain.Identity{OrgID: benchOrg, Username: "bench-org-reader"}, false
		}
		rec.take()
		switch {
		case sc.feed:
			feed, ok := any(store).(changeLister)
			if !ok {
				continue
			}
			// The first page and the next: a follower mostly reads pages after a cursor.
			first, err := feed.ListManagedClusterChanges(ctx, caller, admin, "", 100)
			if err == nil {
				_, err = feed.ListManagedClusterChanges(ctx, caller, admin, first.Cursor, 100)
			}
			if err != nil {
				return nil, fmt.Errorf("explainReads(%s): %w", sc.name, err)
			}
		case sc.get:
			if _, err := store.GetManagedCluster(ctx, caller, admin, id); err != nil {
				return nil, fmt.Errorf("explainReads(%s): %w", sc.name, err)
			}
		default:
			q := sc.query
			q.Search = strings.ReplaceAll(q.Search, "?", "'"+id+"'")
			if _, err := store.ListManagedClusters(ctx, caller, admin, q); err != nil {
				return nil, fmt.Errorf("explainReads(%s): %w", sc.name, err)
			}
		}
		// A SET LOCAL (the admin feed's walkFeedIndex) holds for the rest of
		// its transaction: it is applied to the statements after it.
		var settings []string
		for _, s := range rec.take() {
			if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(s.SQL)), "SET ") {
				settings = append(settings, boundSQL(pg, s))
				continue
			}
			p, err := explain(ctx, db, pg, sc.name, settings, s)
			if err != nil {
				return nil, err
			}
			plans = append(plans, p)
		}
	}
	if o.Policies == 0 {
		return plans, nil
	}
	// The policy resolver's placement of each policy (measurePolicyResolve
	// created them): its other statements write the few rows that moved.
	rec.take()
	if _, err := store.ResolvePolicies(ctx); err != nil {
		return nil, fmt.Errorf("explainReads(policy resolver): %w", err)
	}
	seen := map[string]bool{}
	for _, s := range rec.take() {
		sql := boundSQL(pg, s)
		if !strings.HasPrefix(s.SQL, "SELECT DISTINCT") || seen[sql] { // one plan per organisation and selector
			continue
		}
		seen[sql] = true
		p, err := explain(ctx, db, pg, "policy resolver", nil, s)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of one recorded statement, with
// its values written in; one the server runs with a generic plan is
// prepared and explained as the server runs it (postgres.roundTrip), under
// force_generic_plan. Its settings are applied first, in a transaction
// rolled back after.
func explain(ctx context.Context, db *benchDB, pg *postgres.DB, scenario string, settings []string, s postgres.ObservedStatement) (plan, error) {
	p := plan{scenario: scenario, settings: settings, sql: boundSQL(pg, s)}
	prepared := false
	defer func() {
		if prepared { // a prepared statement outlives the transaction
			_, _ = db.conn.Exec(ctx, "DEALLOCATE generic")
		}
	}()
	tx, err := db.conn.Begin(ctx)
	if err != nil {
		return p, err
	}
	defer func() { _ = tx.Rollback(ctx) }() // read only: nothing to keep
	for _, set := range settings {
		if _, err := tx.Exec(ctx, set); err != nil {
			return p, fmt.Errorf("%s: %w", set, err)
		}
	}
	explained := "EXPLAIN (ANALYZE, BUFFERS) " + p.sql
	if s.Generic {
		prepare, execute := "PREPARE generic AS "+s.SQL, executeGeneric(pg, s)
		p.sql = prepare + "; " + execute
		for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", prepare} {
			// The simple protocol: PREPARE's $n are its own, not this call's.
			if _, err := tx.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
				return p, fmt.Errorf("%s: %w", stmt, err)
			}
			prepared = stmt == prepare
		}
		explained = "EXPLAIN (ANALYZE, BUFFERS) " + execute
	}
	rows, err := tx.Query(ctx, explained)
	if err != nil {
		return p, fmt.Errorf("EXPLAIN %s: %w", p.sql, err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return p, err
		}
		p.lines = append(p.lines, line)
		if m := inventorySeqScan.FindString(line); m != "" {
			p.seqScans = append(p.seqScans, m)
		}
	}
	return p, rows.Err()
}

// executionTime returns the plan's "Execution Time" line's figure.
func (p plan) executionTime() string {
	for _, l := range p.lines {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "Execution Time: "); ok {
			return rest
		}
	}
	return "?"
}

// topNode is the plan's first line without its costs.
func (p plan) topNode() string {
	if len(p.lines) == 0 {
		return ""
	}
	l := p.lines[0]
	if i := strings.Index(l, "  ("); i > 0 {
		l = l[:i]
	}
	return l
}

func printReadPhases(out io.Writer, r *readResults) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treqs\treq/s\tp50\tp99\tmax\tfm CPU/req\tPG CPU/req\tbench CPU/req\ttotal\tpeak RSS MB\t")
	for _, ph := range r.phases {
		total := "-"
		if t, ok := r.totals[ph.Name]; ok {
			total = fmt.Sprint(t)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n", ph.Name, ph.Requests, float64(ph.Requests)/ph.Wall.Seconds(),
			msf(percentile(ph.Latencies, .5)), msf(percentile(ph.Latencies, .99)), msf(percentile(ph.Latencies, 1)),
			msf(perRequest(ph.ServerCPU, ph.Requests)), msf(perRequest(ph.DBCPU, ph.Requests)), msf(perRequest(ph.BenchCPU, ph.Requests)),
			total, float64(ph.PeakRSS)/megabyte)
	}
	tw.Flush()
	fmt.Fprintln(out, "(CPU/req: user+system time of fleet-manager serve (/proc/<pid>/stat), of the database's backends and of")
	fmt.Fprintln(out, " this process, the clients, over the scenario, divided by its requests; total: the `total` the first answer gave)")
}

func printPlans(out io.Writer, plans []plan) {
	fmt.Fprintln(out, "plans: the store functions each scenario calls, run in this process with a statement observer recording")
	fmt.Fprintln(out, "their SQL and values, each statement explained with EXPLAIN (ANALYZE, BUFFERS), values bound")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tstatement\ttop node\texecution\tseq scan of the inventory")
	for _, p := range plans {
		seq := "none"
		if len(p.seqScans) > 0 {
			seq = "**" + strings.Join(p.seqScans, ", ") + "**"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.scenario, truncate(strings.Join(strings.Fields(p.sql), " "), 40),
			strings.TrimSpace(p.topNode()), p.executionTime(), seq)
	}
	tw.Flush()
	for _, p := range plans {
		fmt.Fprintf(out, "\n-- %s\n", p.scenario)
		for _, set := range p.settings {
			fmt.Fprintf(out, "%s;\n", set)
		}
		fmt.Fprintln(out, strings.Join(strings.Fields(p.sql), " "))
		for _, l := range p.lines {
			fmt.Fprintln(out, "   ", l)
		}
	}
	fmt.Fprintln(out)
}

func printReadTargets(out io.Writer, r *readResults) {
	p99 := map[string]time.Duration{}
	for _, ph := range r.phases {
		p99[ph.Name] = percentile(ph.Latencies, .99)
	}
	fmt.Fprintln(out, "targets:")
	for _, name := range []string{"list page of 100", "search label"} {
		d, ok := p99[name]
		verdict(out, "p99 under 50 ms: "+name, ok && d < 50*time.Millisecond, "p99 "+msf(d))
	}
	var seq []string
	for _, p := range r.plans {
		for _, s := range p.seqScans {
			seq = append(seq, p.scenario+": "+s)
		}
	}
	verdict(out, "no sequential scan of the inventory in any plan", len(seq) == 0, fmt.Sprintf("%d found %v", len(seq), seq))
}

func perRequest(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

func msf(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
