package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus-community/prom-label-proxy/injectproxy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/authz"
	domain "github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// metricsOrg is the organisation whose clusters' metrics --user-metrics
// reads: --metrics-org-clusters registrations on shared hubs, each linked
// to a cluster, as a customer's registered clusters are.
const metricsOrg = "metrics-org"

// metricsOrgRegistrationsSQL registers $2 clusters of the shared hubs,
// picked in a random but repeatable order, as metricsOrg's.
const metricsOrgRegistrationsSQL = `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id)
SELECT gen_random_uuid()::text, $1, 'metrics-org-user', c.name, c.zone, 'OCP', 'ready', c.hub_id FROM (
	SELECT mc.name, h.zone, mc.hub_id FROM managed_clusters mc JOIN hubs h ON h.id = mc.hub_id
	WHERE h.owner_org_id IS NULL AND h.deleted_at IS NULL AND mc.deleted_at IS NULL AND mc.registration_id IS NULL
	ORDER BY md5(mc.id::text) LIMIT $2) AS c`

// metricsOrgIDsSQL is the cluster label's values of metricsOrg's clusters.
const metricsOrgIDsSQL = `SELECT mc.cluster_id FROM registrations r JOIN managed_clusters mc ON mc.registration_id = r.id
WHERE r.org_id = $1 AND mc.deleted_at IS NULL ORDER BY mc.cluster_id`

// otherIDsSQL is $2 cluster label values of other organisations' clusters.
const otherIDsSQL = `SELECT mc.cluster_id FROM managed_clusters mc LEFT JOIN registrations r ON r.id = mc.registration_id
WHERE mc.deleted_at IS NULL AND r.org_id IS DISTINCT FROM $1 ORDER BY md5(mc.id::text) LIMIT $2`

// metricsAllowList is the run's --user-metrics-allow-list-file: the
// exporter's metrics and labels, and every inventory series.
const metricsAllowList = `metrics: [cluster:cpu_usage_cores:sum, cluster:memory_usage_bytes:sum, cluster:capacity_cpu_cores:sum,
  cluster:capacity_memory_bytes:sum, kube_node_status_capacity]
labels: [node, resource, unit]
inventory: [cluster_info, cluster_available, cluster_phase, cluster_capacity, cluster_allocatable,
  cluster_policy_compliant, registrations, pool_clusters, pool_capacity_units, pool_reserved_units]
`

// metricsScenario is one kind of request, sent requests times by
// concurrency workers.
type metricsScenario struct {
	name        string
	pair        string // the query both ways share; empty for the text endpoint
	direct      bool
	concurrency int
	requests    int
	request     func(context.Context) (*http.Request, error)
}

// metricsPhase is what one scenario measured.
type metricsPhase struct {
	phase
	scenario metricsScenario
	bytes    int64         // answer bytes, summed
	results  int           // series (or text samples) of the first answer
	promCPU  time.Duration // the Prometheus child's user+system time
}

// metricsResults is what the user-metrics benchmark measured.
type metricsResults struct {
	opts        options
	machine     machine
	started     time.Time
	took        time.Duration
	clusters    int
	orgClusters int
	other       int
	series      int
	regexBytes  int
	confine     time.Duration // one confinement of the per-cluster query, in this process
	storeReads  map[string][]time.Duration
	plans       []plan
	phases      []metricsPhase
	peakRSS     int64
	hwm         int64
	promRSS     int64
	notes       []string
	checks      []string
}

// runUserMetrics measures the user-facing metrics (--user-metrics): the
// proxy's query and query_range against the same queries sent to
// Prometheus directly, and the text endpoint, for metricsOrg's clusters in
// a database at fleet size.
func runUserMetrics(ctx context.Context, o options, out io.Writer) error {
	o.Resources = 0 // the generic resources play no part in the metrics
	r := &metricsResults{opts: o, started: time.Now(), storeReads: map[string][]time.Duration{}}
	r.machine = thisMachine()
	dir, err := os.MkdirTemp("", "fleet-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := readsDatabase(ctx, o)
	if err != nil {
		return err
	}
	defer finishDatabase(db, o.KeepDatabase || o.ReadsDatabase != "", out)
	if r.machine.postgres, err = db.serverFacts(ctx); err != nil {
		return err
	}
	exp, err := startExporter()
	if err != nil {
		return err
	}
	defer exp.stop()
	prom, err := startPrometheus(o.Prometheus, dir, exp.addr, o.MetricsHistory)
	if err != nil {
		return err
	}
	defer prom.stop()
	allow := filepath.Join(dir, "allow-list.yaml")
	if err := os.WriteFile(allow, []byte(metricsAllowList), 0o600); err != nil {
		return err
	}
	o.ServeArgs = append([]string{"--user-metrics-backend-url=" + prom.url, "--user-metrics-allow-list-file=" + allow,
		"--user-metrics-rate=100000", "--user-metrics-burst=100000"}, o.ServeArgs...)
	files, err := newServerFiles(dir, o.ServerLog)
	if err != nil {
		return err
	}
	m, err := newMinter(files.keyDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "fleet-bench --user-metrics: database %s, prometheus %s; starting %s serve\n", db.name, prom.url, o.FleetManager)
	s, err := startServer(ctx, o, db, files)
	if err != nil {
		return err
	}
	defer s.stop()
	if o.ReadsDatabase == "" {
		if _, err := setupFleet(ctx, o, s, m); err != nil {
			return err
		}
		if _, _, err := loadReadData(ctx, o, db, out); err != nil {
			return err
		}
	} else {
		r.notes = append(r.notes, "the run used database "+db.name+", loaded by an earlier run (--reads-database)")
	}
	if err := db.conn.QueryRow(ctx, `SELECT count(*) FROM managed_clusters WHERE deleted_at IS NULL`).Scan(&r.clusters); err != nil {
		return err
	}
	orgIDs, otherIDs, err := metricsOrgClusters(ctx, o, db, out)
	if err != nil {
		return err
	}
	r.orgClusters, r.other, r.series = len(orgIDs), len(otherIDs), (len(orgIDs)+len(otherIDs))*seriesPerCluster
	end := time.Now().Truncate(time.Minute)
	if err := feedPrometheus(ctx, o, exp, prom, slices.Concat(orgIDs, otherIDs), end, out); err != nil {
		return err
	}
	if err := measureUserMetrics(ctx, r, db, s, prom, m, orgIDs, end, out); err != nil {
		return err
	}
	if err := timeMetricsStore(ctx, r, db); err != nil {
		return err
	}
	r.promRSS, _ = procStatusKB(prom.pid(), "VmRSS")
	r.machine.loadAfter, r.took = loadAverage(), time.Since(r.started)
	reportUserMetrics(out, r)
	return nil
}

// metricsOrgClusters registers metricsOrg's clusters (unless a kept
// database has them) and returns its clusters' and others' label values.
func metricsOrgClusters(ctx context.Context, o options, db *benchDB, out io.Writer) (org, other []string, err error) {
	var have int
	if err := db.conn.QueryRow(ctx, `SELECT count(*) FROM registrations WHERE org_id = $1`, metricsOrg).Scan(&have); err != nil {
		return nil, nil, err
	}
	if have == 0 {
		start := time.Now()
		if _, err := db.conn.Exec(ctx, metricsOrgRegistrationsSQL, metricsOrg, o.MetricsOrgClusters); err != nil {
			return nil, nil, fmt.Errorf("registering %s's clusters: %w", metricsOrg, err)
		}
		for _, q := range []string{orgLinkSQL, placedSQL} {
			args := []any{metricsOrg}
			if q == placedSQL {
				args = nil
			}
			if _, err := db.conn.Exec(ctx, q, args...); err != nil {
				return nil, nil, fmt.Errorf("linking %s's clusters: %w", metricsOrg, err)
			}
		}
		if _, err := db.conn.Exec(ctx, `VACUUM (ANALYZE) registrations, managed_clusters, hubs`); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(out, "%s: %d registrations on shared hubs, linked to their clusters, in %s\n", metricsOrg, o.MetricsOrgClusters,
			time.Since(start).Round(time.Millisecond))
	}
	read := func(q string, args ...any) ([]string, error) {
		rows, err := db.conn.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	}
	if org, err = read(metricsOrgIDsSQL, metricsOrg); err != nil {
		return nil, nil, err
	}
	if len(org) != o.MetricsOrgClusters {
		return nil, nil, fmt.Errorf("%s has %d clusters, not --metrics-org-clusters=%d", metricsOrg, len(org), o.MetricsOrgClusters)
	}
	other, err = read(otherIDsSQL, metricsOrg, o.MetricsOtherClusters)
	return org, other, err
}

// feedPrometheus has the exporter replay --metrics-history of every
// cluster's series up to end, waits until Prometheus holds all of them,
// then slows its scrapes to liveScrapeInterval.
func feedPrometheus(ctx context.Context, o options, exp *exporter, prom *promBackend, ids []string, end time.Time, out io.Writer) error {
	start := time.Now()
	exp.replay(ids, o.MetricsHistory, end)
	select {
	case <-exp.replayed:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3*time.Duration(o.MetricsHistory/historyStep)*time.Second + time.Minute):
		return fmt.Errorf("prometheus did not scrape the replayed history in time")
	}
	for _, at := range []time.Time{end.Add(-o.MetricsHistory), end} {
		err := poll(ctx, time.Minute, func() error {
			n, err := prom.count(ctx, clusterSeries[0], at)
			if err == nil && n != len(ids) {
				err = fmt.Errorf("prometheus holds %d of the %d clusters' series at %s", n, len(ids), at.Format(time.RFC3339))
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := prom.slowDown(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "prometheus holds %d series (%d clusters) over %s at %s steps, replayed in %s\n", len(ids)*seriesPerCluster, len(ids),
		o.MetricsHistory, historyStep, time.Since(start).Round(time.Second))
	return nil
}

// metricsQueries are the queries timed both ways: a sum over the
// organisation (a small answer) and every cluster's series (one per cluster).
var metricsQueries = []struct{ name, query string }{
	{"sum", "sum(cluster:cpu_usage_cores:sum)"},
	{"per cluster", "cluster:cpu_usage_cores:sum"},
}

// confined is query as the proxy sends it for clusters ids: the cluster
// label's matcher injected into every selector by prom-label-proxy's
// injectproxy, a regular expression of the sorted, quoted values.
func confined(query string, ids []string) (string, int, error) {
	expr, err := parser.ParseExpr(query)
	if err != nil {
		return "", 0, err
	}
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = regexp.QuoteMeta(id)
	}
	slices.Sort(quoted)
	re := strings.Join(slices.Compact(quoted), "|")
	m, err := labels.NewMatcher(labels.MatchRegexp, "clusterID", re)
	if err != nil {
		return "", 0, err
	}
	if err := injectproxy.NewPromQLEnforcer(false, m).EnforceNode(expr); err != nil {
		return "", 0, err
	}
	return expr.String(), len(re), nil
}

// measureUserMetrics times each query both ways, then the text endpoint.
func measureUserMetrics(ctx context.Context, r *metricsResults, db *benchDB, s *server, prom *promBackend, m *minter,
	orgIDs []string, end time.Time, out io.Writer) error {
	o := r.opts
	p, _, stopBackground, err := startProber(ctx, db, s)
	if err != nil {
		return err
	}
	defer stopBackground()
	bearer, err := m.bearer(auth.TokenRequest{OrgID: metricsOrg, Username: "metrics-org-reader"})
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: 2 * o.ReadConcurrency,
		MaxIdleConnsPerHost: o.ReadConcurrency}}
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	instant := url.Values{"time": {unix(end)}}
	ranged := url.Values{"start": {unix(end.Add(-o.MetricsHistory))}, "end": {unix(end)}, "step": {strconv.Itoa(int(historyStep.Seconds()))}}
	var scenarios []metricsScenario
	for _, kind := range []struct {
		name, path string
		params     url.Values
	}{{"query", "query", instant}, {"range " + o.MetricsHistory.String(), "query_range", ranged}} {
		for _, q := range metricsQueries {
			direct, n, err := confined(q.query, orgIDs)
			if err != nil {
				return err
			}
			r.regexBytes = n
			name := kind.name + " " + q.name
			proxied := cloneValues(kind.params, "query", q.query)
			sent := cloneValues(kind.params, "query", direct)
			scenarios = append(scenarios,
				metricsScenario{name: name + ", direct", pair: name, direct: true, concurrency: o.ReadConcurrency, requests: o.MetricsRequests,
					request: func(ctx context.Context) (*http.Request, error) {
						// As the proxy's client sends it: a POST form.
						req, err := http.NewRequestWithContext(ctx, http.MethodPost, prom.url+"/api/v1/"+kind.path, strings.NewReader(sent.Encode()))
						if err == nil {
							req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
						}
						return req, err
					}},
				metricsScenario{name: name + ", proxy", pair: name, concurrency: o.ReadConcurrency, requests: o.MetricsRequests,
					request: func(ctx context.Context) (*http.Request, error) {
						req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+"/metrics/"+kind.path+"?"+proxied.Encode(), nil)
						if err == nil {
							err = bearer(ctx, req)
						}
						return req, err
					}})
		}
	}
	for _, c := range []int{1, o.ReadConcurrency} {
		scenarios = append(scenarios, metricsScenario{name: fmt.Sprintf("text /metrics, %d client(s)", c), concurrency: c, requests: o.MetricsTextRequests,
			request: func(ctx context.Context) (*http.Request, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+"/metrics", nil)
				if err == nil {
					err = bearer(ctx, req)
				}
				return req, err
			}})
	}
	start := time.Now()
	for range 100 {
		if _, _, err := confined(metricsQueries[1].query, orgIDs); err != nil {
			return err
		}
	}
	r.confine = time.Since(start) / 100
	for _, sc := range scenarios {
		fmt.Fprintf(out, "%s ...\n", sc.name)
		mp := metricsPhase{scenario: sc}
		promBefore, err := processCPU(prom.pid())
		if err != nil {
			return err
		}
		ph, err := p.measure(ctx, sc.name, func(ctx context.Context, ph *phase) error {
			return driveMetrics(ctx, client, sc, ph, &mp)
		})
		promAfter, perr := processCPU(prom.pid())
		mp.phase, mp.promCPU = ph, promAfter-promBefore
		if err == nil {
			err = perr
		}
		if err != nil {
			return err
		}
		r.phases = append(r.phases, mp)
		if err := s.alive(); err != nil {
			return err
		}
	}
	r.peakRSS = p.rss.peak.Load()
	r.hwm, err = procStatusKB(s.pid(), "VmHWM")
	if err != nil {
		return err
	}
	return r.check()
}

// check fails the run unless each query answered the same series both ways,
// one per cluster for the per-cluster queries.
func (r *metricsResults) check() error {
	byPair := map[string][]metricsPhase{}
	for _, ph := range r.phases {
		if ph.scenario.pair != "" {
			byPair[ph.scenario.pair] = append(byPair[ph.scenario.pair], ph)
		}
	}
	for _, pair := range slices.Sorted(maps.Keys(byPair)) {
		phs := byPair[pair]
		if len(phs) != 2 || phs[0].results != phs[1].results {
			return fmt.Errorf("%s: the direct and proxied answers differ in their series", pair)
		}
		if strings.HasSuffix(pair, "per cluster") && phs[0].results != r.orgClusters {
			return fmt.Errorf("%s: %d series answered, not one for each of %d clusters", pair, phs[0].results, r.orgClusters)
		}
		r.checks = append(r.checks, fmt.Sprintf("%s: %d series both ways", pair, phs[0].results))
	}
	return nil
}

func cloneValues(v url.Values, key, value string) url.Values {
	out := url.Values{key: {value}}
	for k, vs := range v {
		out[k] = vs
	}
	return out
}

// driveMetrics sends sc.requests requests from sc.concurrency workers,
// recording each one's latency and answer size.
func driveMetrics(ctx context.Context, client *http.Client, sc metricsScenario, ph *phase, mp *metricsPhase) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		left     atomic.Int64
		first    sync.Once
	)
	left.Store(int64(sc.requests))
	for range sc.concurrency {
		wg.Go(func() {
			var (
				lat  []time.Duration
				size int64
				buf  bytes.Buffer
			)
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil && ctx.Err() == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				req, err := sc.request(ctx)
				if err != nil {
					fail(err)
					break
				}
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					fail(err)
					break
				}
				buf.Reset()
				_, err = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("%s %s = %s: %s", req.Method, req.URL.Path, resp.Status, truncate(buf.String(), 300))
				}
				if err != nil {
					fail(err)
					break
				}
				lat = append(lat, took)
				size += int64(buf.Len())
				first.Do(func() { mp.results = countResults(buf.Bytes(), sc.pair == "") })
			}
			mu.Lock()
			ph.Latencies = append(ph.Latencies, lat...)
			mp.bytes += size
			mu.Unlock()
		})
	}
	wg.Wait()
	ph.Requests = len(ph.Latencies)
	return firstErr
}

// countResults counts an answer's series: the query API's result, or the
// samples of a text exposition.
func countResults(body []byte, text bool) int {
	if text {
		n := 0
		for line := range bytes.SplitSeq(body, []byte("\n")) {
			if len(line) > 0 && line[0] != '#' {
				n++
			}
		}
		return n
	}
	var ans struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ans) != nil {
		return -1
	}
	return len(ans.Data.Result)
}

// storeReadRepeats is how often each store read is timed in this process.
const storeReadRepeats = 20

// timeMetricsStore times the store reads behind each request in this
// process, on the benchmark database: the clusters a query is confined to,
// and the inventory the text endpoint renders.
func timeMetricsStore(ctx context.Context, r *metricsResults, db *benchDB) error {
	o := r.opts
	cfg := postgres.DefaultConfig()
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Name = o.DB.Host, o.DB.Port, o.DB.User, o.DB.Password, db.name
	cfg.MaxOpenConns = 2
	pg, err := postgres.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return fmt.Errorf("timeMetricsStore: %w", err)
	}
	defer pg.Close()
	store := postgres.NewStore(pg, nil, domain.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	scope := domain.MetricsScope{Caller: domain.Identity{OrgID: metricsOrg, Username: "metrics-org-reader"}, Limit: 5000,
		ClusterLabelSource: "cluster-id"}
	for _, read := range []struct {
		name string
		call func() error
	}{
		{"MetricsClusters", func() error { _, err := store.MetricsClusters(ctx, scope); return err }},
		{"MetricsInventory", func() error { _, err := store.MetricsInventory(ctx, scope); return err }},
	} {
		for range storeReadRepeats {
			start := time.Now()
			if err := read.call(); err != nil {
				return fmt.Errorf("timeMetricsStore: %s: %w", read.name, err)
			}
			r.storeReads[read.name] = append(r.storeReads[read.name], time.Since(start))
		}
	}
	// Then once more, recording the statements, to explain them.
	rec := &statementRecorder{}
	if err := pg.ObserveStatements(rec.observe); err != nil {
		return fmt.Errorf("timeMetricsStore: %w", err)
	}
	if _, err := store.MetricsInventory(ctx, scope); err != nil {
		return fmt.Errorf("timeMetricsStore: %w", err)
	}
	for _, st := range rec.take() {
		p, err := explain(ctx, db, pg, "MetricsInventory", nil, st)
		if err != nil {
			return err
		}
		r.plans = append(r.plans, p)
	}
	return nil
}

// reportUserMetrics prints the machine, the scenarios and the overheads.
func reportUserMetrics(out io.Writer, r *metricsResults) {
	o := r.opts
	fmt.Fprintf(out, "\nfleet-bench --user-metrics %s (took %s)\n", r.started.Format(time.RFC3339), r.took.Round(time.Second))
	fmt.Fprintf(out, "command:  %s\n", strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " "))
	fmt.Fprintf(out, "machine:  %d CPUs (%s), %.1f GiB memory, %s\n", r.machine.cpus, r.machine.cpuModel,
		float64(r.machine.memory)/(1<<30), r.machine.goVersion)
	fmt.Fprintf(out, "          %s\n", r.machine.postgres)
	fmt.Fprintf(out, "load:     before %s; after %s (1, 5, 15 min)\n", r.machine.loadBefore, r.machine.loadAfter)
	fmt.Fprintf(out, "data:     %d managed clusters behind %d hubs; %s has %d of them (registrations on shared hubs)\n",
		r.clusters, o.Hubs, metricsOrg, r.orgClusters)
	fmt.Fprintf(out, "backend:  Prometheus holds %d series: %d per cluster for %s's %d and %d other clusters, %s of history at %s\n",
		r.series, seriesPerCluster, metricsOrg, r.orgClusters, r.other, o.MetricsHistory, historyStep)
	fmt.Fprintf(out, "queries:  instant at the history's end; range over the history at step %s; direct: the confined query\n", historyStep)
	fmt.Fprintf(out, "          (a clusterID=~ matcher of %d bytes) POSTed to Prometheus; proxy: the query to fleet-manager as %s\n\n",
		r.regexBytes, metricsOrg)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tclients\treqs\treq/s\tp50\tp99\tmax\tanswer KB\tseries\tfm CPU/req\tprom CPU/req\tPG CPU/req\tbench CPU/req\t")
	for _, ph := range r.phases {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%.1f\t%d\t%s\t%s\t%s\t%s\t\n", ph.Name, ph.scenario.concurrency, ph.Requests,
			float64(ph.Requests)/ph.Wall.Seconds(), msf(percentile(ph.Latencies, .5)), msf(percentile(ph.Latencies, .99)),
			msf(percentile(ph.Latencies, 1)), float64(ph.bytes)/float64(max(ph.Requests, 1))/1024, ph.results,
			msf(perRequest(ph.ServerCPU, ph.Requests)), msf(perRequest(ph.promCPU, ph.Requests)), msf(perRequest(ph.DBCPU, ph.Requests)),
			msf(perRequest(ph.BenchCPU, ph.Requests)))
	}
	tw.Flush()
	fmt.Fprintln(out, "(CPU/req: user+system time of fleet-manager serve, of Prometheus, of the database's backends and of this")
	fmt.Fprintln(out, " process over the scenario, divided by its requests; series: of the first answer, or the text's samples)")
	fmt.Fprintln(out, "\noverhead of the proxy (proxy minus direct):")
	for i := 0; i+1 < len(r.phases); i++ {
		d, p := r.phases[i], r.phases[i+1]
		if !d.scenario.direct || p.scenario.pair != d.scenario.pair {
			continue
		}
		fmt.Fprintf(out, "  %-26s p50 %s, p99 %s\n", d.scenario.pair+":",
			msf(percentile(p.Latencies, .5)-percentile(d.Latencies, .5)), msf(percentile(p.Latencies, .99)-percentile(d.Latencies, .99)))
	}
	fmt.Fprintf(out, "\nin this process: confining the per-cluster query to %d clusters (parse, inject, print) %s\n", r.orgClusters, msf(r.confine))
	for _, name := range slices.Sorted(maps.Keys(r.storeReads)) {
		ds := r.storeReads[name]
		fmt.Fprintf(out, "store %s of %s: p50 %s, max %s (%d reads)\n", name, metricsOrg, msf(percentile(ds, .5)), msf(percentile(ds, 1)), len(ds))
	}
	fmt.Fprintln(out, "\nplans: the statements of one MetricsInventory, run in this process, explained (values bound; long ones cut)")
	for _, p := range r.plans {
		fmt.Fprintf(out, "\n-- %s\n%s\n", p.executionTime(), truncate(strings.Join(strings.Fields(p.sql), " "), 400))
		for _, l := range p.lines {
			fmt.Fprintln(out, "   ", l)
		}
	}
	fmt.Fprintln(out)
	for _, c := range r.checks {
		fmt.Fprintln(out, "check:", c)
	}
	for _, n := range r.notes {
		fmt.Fprintln(out, "note:", n)
	}
	fmt.Fprintf(out, "serve memory: peak VmRSS %.1f MB, VmHWM %.1f MB; prometheus VmRSS at the end %.1f MB\n",
		float64(r.peakRSS)/megabyte, float64(r.hwm)/megabyte, float64(r.promRSS)/megabyte)
}
