package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// orgUser signs requests as a user of one organisation, without an admin role.
type orgUser struct {
	org string
	fn  public.RequestEditorFn
}

// orgUsers mints a user's token for each organisation.
func orgUsers(m *minter, orgs []string) ([]orgUser, error) {
	users := make([]orgUser, len(orgs))
	for i, org := range orgs {
		fn, err := m.bearer(auth.TokenRequest{OrgID: org, Username: "bench-user"})
		if err != nil {
			return nil, err
		}
		users[i] = orgUser{org: org, fn: public.RequestEditorFn(fn)}
	}
	return users, nil
}

// manyOrgs names the n organisations of the many-organisations scenarios.
func manyOrgs(n int) []string {
	orgs := make([]string, n)
	for i := range orgs {
		orgs[i] = fmt.Sprintf("bench-org-%03d", i+1)
	}
	return orgs
}

// createResult is what one create scenario measured: the POSTs, the
// counters while they were sent, and the wait until every registration they
// created was Delivered. Its phase spans both; its Latencies are the POSTs
// answered 202.
type createResult struct {
	phase
	orgs       int
	rowsBefore int            // live registrations when it started
	created    int            // POSTs answered 202
	failures   map[string]int // the others, by status and code, or the transport error
	posting    time.Duration  // from the first POST to the last answer
	postCPU    counters       // the counters' growth while posting
	delivery   deliveryOutcome
}

// deliveryOutcome is how long the registrations of a scenario took to be
// Delivered, counted from the scenario's first request.
type deliveryOutcome struct {
	want, delivered int
	after           time.Duration // until the last was seen Delivered; when all were
}

// all tells whether every registration was Delivered.
func (d deliveryOutcome) all() bool { return d.want > 0 && d.delivered == d.want }

// rate is the POSTs answered 202 per second of posting.
func (c createResult) rate() float64 { return perSecond(c.created, c.posting) }

// perSecond is n per d, 0 without time.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// failureKey groups a refused request: its status and the error code of
// its body (the OCM error body), or "transport" for an error before any
// answer.
func failureKey(status int, body []byte) string {
	if status == 0 {
		return "transport"
	}
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &e) != nil || e.Code == "" {
		return fmt.Sprint(status)
	}
	return fmt.Sprintf("%d %s", status, e.Code)
}

// describeFailures renders failures as "n x key", most frequent first.
func describeFailures(failures map[string]int) string {
	if len(failures) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(failures))
	for k := range failures {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if failures[keys[i]] != failures[keys[j]] {
			return failures[keys[i]] > failures[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d x %s", failures[k], k)
	}
	return strings.Join(parts, ", ")
}

// creator posts the create scenarios' registrations.
type creator struct {
	client *public.ClientWithResponses
	p      *prober
	watch  *deliveryWatch
	o      options
}

// newCreator returns a creator with a keep-alive connection per client.
func newCreator(o options, s *server, p *prober, watch *deliveryWatch) (*creator, error) {
	client, err := public.NewClientWithResponses(s.apiURL, public.WithHTTPClient(&http.Client{Timeout: time.Minute,
		Transport: &http.Transport{MaxIdleConns: o.CreateConcurrency, MaxIdleConnsPerHost: o.CreateConcurrency}}))
	return &creator{client: client, p: p, watch: watch, o: o}, err
}

// run times one create scenario: --create-concurrency clients post as
// users in turn, for --create-duration or --create-count, registrations
// named prefix-<n> in zone benchZone; then it waits until every one created
// is Delivered, or --delivery-timeout.
func (c *creator) run(ctx context.Context, name, prefix string, users []orgUser) (createResult, error) {
	r := createResult{orgs: len(users), failures: map[string]int{}}
	var err error
	if r.rowsBefore, err = countRegistrations(ctx, c.p.db); err != nil {
		return r, err
	}
	r.phase, err = c.p.measure(ctx, name, func(ctx context.Context, ph *phase) error {
		c.p.backend.sample(ctx)
		before, err := c.p.read(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		ids, latencies := c.post(ctx, prefix, users, r.failures)
		r.posting = time.Since(start)
		c.p.backend.sample(ctx)
		after, err := c.p.read(ctx)
		if err != nil {
			return err
		}
		r.postCPU = after.minus(before)
		r.created, r.delivery.want = len(ids), len(ids)
		ph.Requests, ph.Rows, ph.Latencies = r.created+failureCount(r.failures), r.created, latencies
		r.delivery.delivered, err = c.watch.waitIDs(ctx, ids, c.o.DeliveryTimeout)
		r.delivery.after = time.Since(start)
		return err
	})
	return r, err
}

// post sends the scenario's POSTs and returns the ids created and their
// POSTs' latencies; it counts the refused ones into failures.
func (c *creator) post(ctx context.Context, prefix string, users []orgUser, failures map[string]int) ([]string, []time.Duration) {
	deadline := time.Now().Add(c.o.CreateDuration)
	var (
		next atomic.Int64
		mu   sync.Mutex
		ids  []string
		all  []time.Duration
		wg   sync.WaitGroup
	)
	zone := benchZone
	for range c.o.CreateConcurrency {
		wg.Go(func() {
			var mine []string
			var lat []time.Duration
			fails := map[string]int{}
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if c.o.CreateCount > 0 && i >= c.o.CreateCount || c.o.CreateCount == 0 && !time.Now().Before(deadline) {
					break
				}
				user := users[i%len(users)]
				labels := public.Labels{"env": "bench", "team": fmt.Sprintf("team-%d", i%20)}
				start := time.Now()
				resp, err := c.client.CreateClusterWithResponse(ctx, nil, public.ClusterCreate{Name: fmt.Sprintf("%s-%06d", prefix, i),
					Product: public.OCP, Zone: &zone, Labels: &labels}, user.fn)
				took := time.Since(start)
				switch {
				case err != nil:
					if ctx.Err() == nil {
						fails[failureKey(0, nil)]++
						pause(ctx, 100*time.Millisecond)
					}
				case resp.JSON202 != nil:
					mine, lat = append(mine, resp.JSON202.Id), append(lat, took)
				default:
					fails[failureKey(resp.StatusCode(), resp.Body)]++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			ids, all = append(ids, mine...), append(all, lat...)
			for k, n := range fails {
				failures[k] += n
			}
		})
	}
	wg.Wait()
	return ids, all
}

func failureCount(failures map[string]int) int {
	n := 0
	for _, v := range failures {
		n += v
	}
	return n
}

// deliveredJSON is the containment test of a Delivered condition that is True.
const deliveredJSON = `[{"type":"Delivered","status":"True"}]`

// deliveryWatch reads, on its own connection (left out of the database CPU
// the phases report), which registrations are Delivered.
type deliveryWatch struct {
	conn *pgx.Conn
	poll time.Duration
}

// newDeliveryWatch connects to the benchmark database and leaves the
// connection's backend out of backend's sums.
func newDeliveryWatch(ctx context.Context, db *benchDB, backend *backendCPU) (*deliveryWatch, error) {
	conn, err := pgx.Connect(ctx, db.server.dsn(db.name))
	if err != nil {
		return nil, fmt.Errorf("newDeliveryWatch: %w", err)
	}
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("newDeliveryWatch: %w", err)
	}
	backend.excludeBackend(pid)
	return &deliveryWatch{conn: conn, poll: 100 * time.Millisecond}, nil
}

func (w *deliveryWatch) close() { _ = w.conn.Close(context.Background()) }

// waitIDs waits until every registration of ids is Delivered, or timeout,
// and returns how many were.
func (w *deliveryWatch) waitIDs(ctx context.Context, ids []string, timeout time.Duration) (int, error) {
	remaining := map[string]bool{}
	for _, id := range ids {
		remaining[id] = true
	}
	deadline := time.Now().Add(timeout)
	for len(remaining) > 0 && time.Now().Before(deadline) {
		left := make([]string, 0, len(remaining))
		for id := range remaining {
			left = append(left, id)
		}
		rows, err := w.conn.Query(ctx, `SELECT id FROM registrations WHERE id = ANY($1) AND conditions @> $2::jsonb`, left, deliveredJSON)
		if err != nil {
			return len(ids) - len(remaining), fmt.Errorf("reading Delivered: %w", err)
		}
		done, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return len(ids) - len(remaining), fmt.Errorf("reading Delivered: %w", err)
		}
		for _, id := range done {
			delete(remaining, id)
		}
		if len(remaining) > 0 {
			pause(ctx, w.poll)
		}
		if ctx.Err() != nil {
			return len(ids) - len(remaining), ctx.Err()
		}
	}
	return len(ids) - len(remaining), nil
}

// waitOrgs waits until want live registrations of orgs are Delivered, or
// timeout, and returns how many were. Each look counts the organisations'
// rows, which grows with the fleet and shares the machine's CPUs with the
// server (docs/performance.md has what it cost): it looks again after a second or five times as long as
// the count took, whichever is longer, so the watch takes at most a sixth
// of one CPU from what it measures.
func (w *deliveryWatch) waitOrgs(ctx context.Context, orgs []string, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		began := time.Now()
		if err := w.conn.QueryRow(ctx, `SELECT count(*) FROM registrations WHERE org_id = ANY($1) AND deleted_at IS NULL
			AND conditions @> $2::jsonb`, orgs, deliveredJSON).Scan(&n); err != nil {
			return 0, fmt.Errorf("counting Delivered: %w", err)
		}
		if n >= want || !time.Now().Before(deadline) {
			return n, nil
		}
		pause(ctx, max(time.Second, 5*time.Since(began)))
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
	}
}
