package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	domain "github.com/fleetmanager/fleet-manager/internal/fleet"
)

// readScenario is one kind of read request, repeated by every worker for the
// scenario's time. next returns the request's path and query (below the API's
// base path) for a worker's state; seen reads what an answer tells the next
// request (the change feed's cursor).
type readScenario struct {
	name  string
	query domain.ListQuery // what the store is asked, for the plans
	feed  bool
	get   bool // GET /managed_clusters/{id}: the plans explain GetManagedCluster
	org   bool // read as benchOrg, without an admin role
	next  func(w *readWorker) string
	seen  func(w *readWorker, body []byte)
}

// readWorker is one of the concurrent clients of a scenario.
type readWorker struct {
	rng    *rand.Rand
	cursor string
}

// readResults is what the read benchmark measured.
type readResults struct {
	opts      options
	machine   machine
	started   time.Time
	took      time.Duration
	clusters  int
	resources int
	org       orgShare
	phases    []phase
	totals    map[string]int // the `total` each list scenario answered
	plans     []plan
	peakRSS   int64
	hwm       int64
	notes     []string
	policies  policyResolve
}

// runReads loads the inventory by SQL and times the read scenarios through
// the API, then explains the queries they used. It runs instead of the ingest
// phases (--reads).
func runReads(ctx context.Context, o options, out io.Writer) error {
	r := &readResults{opts: o, started: time.Now(), totals: map[string]int{}}
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
	files, err := newServerFiles(dir, o.ServerLog)
	if err != nil {
		return err
	}
	m, err := newMinter(files.keyDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "fleet-bench --reads: database %s; starting %s serve\n", db.name, o.FleetManager)
	s, err := startServer(ctx, o, db, files)
	if err != nil {
		return err
	}
	defer s.stop()
	if o.ReadsDatabase != "" {
		r.notes = append(r.notes, "the reads ran on database "+db.name+", loaded by an earlier run (--reads-database)")
		if r.resources, r.org, err = loadedReadData(ctx, db); err != nil {
			return err
		}
	} else {
		if _, err := setupFleet(ctx, o, s, m); err != nil {
			return err
		}
		if r.resources, r.org, err = loadReadData(ctx, o, db, out); err != nil {
			return err
		}
	}
	if err := db.conn.QueryRow(ctx, `SELECT count(*) FROM managed_clusters WHERE deleted_at IS NULL`).Scan(&r.clusters); err != nil {
		return err
	}
	if err := measureReads(ctx, r, db, s, m, out); err != nil {
		return err
	}
	s.stop() // its own resolver would run beside the timed passes
	if r.policies, err = measurePolicyResolve(ctx, o, db); err != nil {
		return err
	}
	if r.plans, err = explainReads(ctx, o, db, r.scenarioQueries()); err != nil {
		return err
	}
	r.machine.loadAfter, r.took = loadAverage(), time.Since(r.started)
	reportReads(out, r)
	return nil
}

// measureReads runs each scenario at --read-concurrency for --read-duration.
func measureReads(ctx context.Context, r *readResults, db *benchDB, s *server, m *minter, out io.Writer) error {
	o := r.opts
	p, _, stopBackground, err := startProber(ctx, db, s)
	if err != nil {
		return err
	}
	defer stopBackground()
	bearer, err := m.bearer(auth.TokenRequest{OrgID: "sre", Username: "bench-reader", Roles: []string{"fleet-admin"}})
	if err != nil {
		return err
	}
	c := &readClient{base: s.apiURL, bearer: bearer, http: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: o.ReadConcurrency, MaxIdleConnsPerHost: o.ReadConcurrency}}}
	org, err := orgClient(c, m)
	if err != nil {
		return err
	}
	scenarios, err := readScenarios(ctx, r, db, c)
	if err != nil {
		return err
	}
	for _, sc := range scenarios {
		fmt.Fprintf(out, "%s ...\n", sc.name)
		client := c
		if sc.org {
			client = org
		}
		ph, err := p.measure(ctx, sc.name, func(ctx context.Context, ph *phase) error {
			return client.drive(ctx, sc, o.ReadConcurrency, o.ReadDuration, ph, r.totals)
		})
		r.phases = append(r.phases, ph)
		if err != nil {
			return err
		}
		if err := s.alive(); err != nil {
			return err
		}
	}
	r.peakRSS = p.rss.peak.Load()
	r.hwm, err = procStatusKB(s.pid(), "VmHWM")
	return err
}

// readScenarios builds the scenarios; the change feed's and get-by-id's
// shapes depend on what the server's OpenAPI document offers.
func readScenarios(ctx context.Context, r *readResults, db *benchDB, c *readClient) ([]readScenario, error) {
	paths, err := c.specPaths(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := sampleIDs(ctx, db, 1000)
	if err != nil {
		return nil, err
	}
	list := func(name string, q domain.ListQuery, org bool) readScenario {
		v := url.Values{"size": {fmt.Sprint(q.Size)}}
		if q.OrderBy != "" {
			v.Set("orderBy", q.OrderBy)
		}
		if q.Search != "" {
			v.Set("search", q.Search)
		}
		path := "/managed_clusters?" + v.Encode()
		return readScenario{name: name, query: q, org: org, next: func(*readWorker) string { return path }}
	}
	scenarios := []readScenario{
		list("list page of 100", domain.ListQuery{Size: 100}, false),
		list("list by name", domain.ListQuery{Size: 100, OrderBy: "name"}, false),
		list("search label", domain.ListQuery{Size: 100, Search: "labels.env = 'prod'"}, false),
		list("search region", domain.ListQuery{Size: 100, Search: "region = 'eu-west-1'"}, false),
	}
	byID := readScenario{name: "get by id", query: domain.ListQuery{Size: 1, Search: "id = '" + ids[0] + "'"}}
	if paths["/managed_clusters/{id}"] {
		byID.next = func(w *readWorker) string { return "/managed_clusters/" + ids[w.rng.IntN(len(ids))] }
	} else {
		r.notes = append(r.notes, "get by id: the API has no /managed_clusters/{id}; measured as the list with search=id = '<id>' (size 1)")
		byID.next = func(w *readWorker) string {
			return "/managed_clusters?" + url.Values{"size": {"1"}, "search": {"id = '" + ids[w.rng.IntN(len(ids))] + "'"}}.Encode()
		}
	}
	scenarios = append(scenarios, byID)
	feed := paths["/managed_clusters/changes"]
	if feed {
		scenarios = append(scenarios, feedScenario("follow change feed", false))
	} else {
		r.notes = append(r.notes, "follow change feed: the API's OpenAPI document has no /managed_clusters/changes; skipped")
	}
	scenarios = append(scenarios, list("list page of 100 (org)", domain.ListQuery{Size: 100}, true))
	if feed {
		scenarios = append(scenarios, feedScenario("follow change feed (org)", true))
	}
	return scenarios, nil
}

// feedScenario follows the change feed from its start, a page of 100 at a
// time, as benchOrg when org is set.
func feedScenario(name string, org bool) readScenario {
	return readScenario{name: name, feed: true, org: org,
		next: func(w *readWorker) string {
			// wait=0s: a follower that caught up asks again rather than long-polling.
			v := url.Values{"size": {"100"}, "wait": {"0s"}}
			if w.cursor != "" {
				v.Set("after", w.cursor)
			}
			return "/managed_clusters/changes?" + v.Encode()
		},
		seen: func(w *readWorker, body []byte) {
			if cursor, ok := leadingString(body, "cursor"); ok {
				w.cursor = cursor
			}
		}}
}

// sampleIDs picks n live cluster ids at random for get-by-id.
func sampleIDs(ctx context.Context, db *benchDB, n int) ([]string, error) {
	rows, err := db.conn.Query(ctx, `SELECT id FROM managed_clusters WHERE deleted_at IS NULL ORDER BY random() LIMIT $1`, n)
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
	if len(ids) == 0 {
		return nil, fmt.Errorf("sampleIDs: no managed clusters loaded")
	}
	return ids, rows.Err()
}

// scenarioQueries are the store calls the scenarios made, for the plans.
func (r *readResults) scenarioQueries() []readScenario {
	return []readScenario{
		{name: "list page of 100", query: domain.ListQuery{Size: 100}},
		{name: "list by name", query: domain.ListQuery{Size: 100, OrderBy: "name"}},
		{name: "search label", query: domain.ListQuery{Size: 100, Search: "labels.env = 'prod'"}},
		{name: "search region", query: domain.ListQuery{Size: 100, Search: "region = 'eu-west-1'"}},
		{name: "get by id", get: true},
		{name: "follow change feed", feed: true},
		{name: "list page of 100 (org)", query: domain.ListQuery{Size: 100}, org: true},
		{name: "follow change feed (org)", feed: true, org: true},
	}
}

// drive runs sc with n workers for d, recording every request's latency.
func (c *readClient) drive(ctx context.Context, sc readScenario, n int, d time.Duration, ph *phase, totals map[string]int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(d)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			w := &readWorker{rng: rand.New(rand.NewPCG(uint64(i), 42))}
			var (
				lat []time.Duration
				buf bytes.Buffer
			)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				start := time.Now()
				err := c.getInto(ctx, sc.next(w), &buf)
				took := time.Since(start)
				body := buf.Bytes()
				if err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				lat = append(lat, took)
				if sc.seen != nil {
					sc.seen(w, body)
				}
				if len(lat) == 1 && !sc.feed {
					var list struct {
						Total int `json:"total"`
					}
					if json.Unmarshal(body, &list) == nil {
						mu.Lock()
						totals[sc.name] = list.Total
						mu.Unlock()
					}
				}
			}
			mu.Lock()
			ph.Latencies = append(ph.Latencies, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	ph.Requests = len(ph.Latencies)
	return firstErr
}

// reportReads prints the machine, the scenarios' figures, the plans and the targets.
func reportReads(out io.Writer, r *readResults) {
	o := r.opts
	fmt.Fprintf(out, "\nfleet-bench --reads %s (took %s)\n", r.started.Format(time.RFC3339), r.took.Round(time.Second))
	fmt.Fprintf(out, "command:  %s\n", strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " "))
	fmt.Fprintf(out, "machine:  %d CPUs (%s), %.1f GiB memory, %s\n", r.machine.cpus, r.machine.cpuModel,
		float64(r.machine.memory)/(1<<30), r.machine.goVersion)
	fmt.Fprintf(out, "          %s\n", r.machine.postgres)
	fmt.Fprintf(out, "load:     before %s; after %s (1, 5, 15 min)\n", r.machine.loadBefore, r.machine.loadAfter)
	fmt.Fprintf(out, "data:     %d managed clusters behind %d hubs, %d other resources (loaded by SQL, then VACUUM ANALYZE)\n",
		r.clusters, o.Hubs, r.resources)
	fmt.Fprintf(out, "load:     %d concurrent clients per scenario, %s each, as a fleet-admin (sees every cluster); the (org)\n", o.ReadConcurrency, o.ReadDuration)
	fmt.Fprintf(out, "          scenarios as %s, no admin role: it owns %d hubs and has %d registrations on shared hubs\n\n",
		benchOrg, r.org.hubs, r.org.registrations)
	printReadPhases(out, r)
	for _, n := range r.notes {
		fmt.Fprintln(out, "note:", n)
	}
	fmt.Fprintf(out, "serve memory: peak VmRSS %.1f MB, VmHWM %.1f MB\n\n", float64(r.peakRSS)/megabyte, float64(r.hwm)/megabyte)
	r.policies.print(out)
	printPlans(out, r.plans)
	printReadTargets(out, r)
}
