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

// sqlRecorder is a slog handler keeping the SQL the store logs in debug mode,
// with its parameters bound.
type sqlRecorder struct {
	mu  sync.Mutex
	sql []string
}

func (h *sqlRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *sqlRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *sqlRecorder) WithGroup(string) slog.Handler            { return h }
func (h *sqlRecorder) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "sql" {
			h.mu.Lock()
			h.sql = append(h.sql, a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// take returns the statements recorded since the last take.
func (h *sqlRecorder) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sql
	h.sql = nil
	return s
}

// changeLister is the change feed's store method, when the tree has it.
type changeLister interface {
	ListManagedClusterChanges(ctx context.Context, caller domain.Identity, admin bool, after string, size int) (domain.ChangePage, error)
}

// explainReads runs the store functions the server ran for each scenario,
// in this process with a debug logger that records their SQL with the
// parameters bound, and explains every statement.
func explainReads(ctx context.Context, o options, db *benchDB, scenarios []readScenario) ([]plan, error) {
	cfg := postgres.DefaultConfig()
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Name = o.DB.Host, o.DB.Port, o.DB.User, o.DB.Password, db.name
	cfg.Debug, cfg.MaxOpenConns = true, 2
	rec := &sqlRecorder{}
	pg, err := postgres.Open(cfg, slog.New(rec))
	if err != nil {
		return nil, fmt.Errorf("explainReads: %w", err)
	}
	defer pg.Close()
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
		for _, sql := range rec.take() {
			if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sql)), "SET ") {
				settings = append(settings, sql)
				continue
			}
			p, err := explain(ctx, db, sc.name, settings, sql)
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
	for _, sql := range rec.take() {
		if !strings.HasPrefix(sql, "SELECT DISTINCT") || seen[sql] { // one plan per organisation and selector
			continue
		}
		seen[sql] = true
		p, err := explain(ctx, db, "policy resolver", nil, sql)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of one recorded statement.
// Its settings are applied first, in a transaction rolled back after.
func explain(ctx context.Context, db *benchDB, scenario string, settings []string, sql string) (plan, error) {
	p := plan{scenario: scenario, settings: settings, sql: sql}
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
	explained := "EXPLAIN (ANALYZE, BUFFERS) " + sql
	if prepare, execute, ok := strings.Cut(sql, "; EXECUTE generic"); ok && strings.HasPrefix(prepare, postgres.GenericPrepare) {
		// Run with a generic plan, as the server runs it (postgres.roundTrip).
		for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", prepare} {
			// The simple protocol: PREPARE's $n are its own, not this call's.
			if _, err := tx.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
				return p, fmt.Errorf("%s: %w", stmt, err)
			}
			prepared = stmt == prepare
		}
		explained = "EXPLAIN (ANALYZE, BUFFERS) EXECUTE generic" + execute
	}
	rows, err := tx.Query(ctx, explained)
	if err != nil {
		return p, fmt.Errorf("EXPLAIN %s: %w", sql, err)
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
	fmt.Fprintln(out, "plans: the store functions each scenario calls, run in this process with a debug logger recording")
	fmt.Fprintln(out, "their SQL (parameters bound), each statement explained with EXPLAIN (ANALYZE, BUFFERS)")
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
