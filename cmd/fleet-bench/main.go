// Command fleet-bench measures the fleet manager's inventory ingest and the
// propagation of new registrations to the hubs' agents, against the real
// server and the real PostgreSQL, with simulated agents: the generated agent
// client (pkg/api/private) driven in-process, one goroutine and one
// keep-alive HTTP client per hub, no hub needed.
//
// It builds nothing itself. It creates a fresh database (fmbench_<random>) on
// the PostgreSQL server the --db-* flags name, runs the fleet-manager binary
// given by --fleet-manager as a child process (`generate-key`, `migrate`, then
// `serve` on free loopback ports with a temporary development signing key),
// mints tokens with that key, creates --hubs agent hubs in zone "bench", and
// then times, one after the other:
//
//   - the floor: one INSERT ... SELECT generate_series of hubs x clusters-per-hub
//     cluster-shaped rows (two jsonb columns) into a scratch table shaped like
//     managed_clusters, then the same rows upserted again with ON CONFLICT DO
//     UPDATE: what PostgreSQL alone needs for the rows, in the same run; and,
//     for context, the same with all five jsonb columns filled, rows as large
//     as the ingested ones;
//   - full sync: every agent at once sends a full resync of its clusters in
//     batches of --batch-size;
//   - unchanged resync: the same again, under a new generation;
//   - changes: every agent sends one batch of --change-fraction of its clusters
//     with a new version claim;
//   - propagation: every agent long-polls its desired set while the driver
//     registers --propagation-samples clusters through POST /clusters, one at a
//     time; a sample is the time from the POST's answer to the moment the
//     agent of the hub it was placed on receives a desired set holding it.
//
// Throughout, it samples the serve child's resident set (VmRSS every 100 ms,
// VmHWM at the end), its CPU time, the CPU time of the database's backends,
// the WAL written and the server's connection-pool waits, and checks that the
// inventory acknowledgements add up. It prints the figures, the machine and
// each target of the issue with PASS or MISS. A MISS is a finding, not a
// failure: the exit status is non-zero only when the run itself failed or an
// acknowledgement did not add up.
//
// With --reads it runs the read benchmark instead: it loads hubs x
// clusters-per-hub managed clusters (and --resources rows of the generic
// resources table, when that is migrated) by SQL, then times, each with
// --read-concurrency clients for --read-duration, a list page of 100 in the
// default order and by name, a label search, a region search, a get by id
// and following the change feed (when the server offers it), and prints the
// EXPLAIN (ANALYZE, BUFFERS) of the statements each used.
//
// With --registrations it runs the registration benchmark instead, the
// reconcilers on and every agent long-polling its desired set and
// acknowledging each revision at once: POST /clusters at
// --create-concurrency from one organisation and from --create-orgs, first
// with 100 registrations in the table, then after loading
// --loaded-registrations settled ones by SQL, each timed until every
// registration it created is Delivered; then list pages, searches, get by id
// and the import material at that size; then bulk onboarding of
// --bulk-registrations through POST /clusters:batch, when the server offers
// it, until all are Delivered.
//
// With --pools it runs the capacity-pool benchmark instead: --pool-count pools
// of --pool-clusters clusters (and --pool-samples pools of 2) are created
// through the API, made by pool_mgr, published and reported joined by the
// agents; then POST /clusters and POST reservations into random pools, each
// at --create-concurrency for --create-duration; then, one pool at a time, a
// booking that crosses a cluster's node threshold, timed until a long-poll of
// its hub's desired set holds the cluster's scaled MachinePool.
//
// With --user-metrics it runs the user-facing metrics benchmark instead: it
// loads the inventory by SQL as --reads does, gives the organisation
// metrics-org --metrics-org-clusters registrations on shared hubs, starts a
// Prometheus child (--prometheus, on a free loopback port with its own data
// directory) scraping an in-process exporter that replays --metrics-history
// of that organisation's clusters' series and of --metrics-other-clusters
// others', runs serve with --user-metrics-backend-url pointing at it, and
// then sends --metrics-requests of each query and query_range scenario from
// --read-concurrency clients, through the proxy as metrics-org and straight
// to Prometheus with the query the proxy would send, then
// --metrics-text-requests of GET {base}/metrics, printing p50 and p99, the
// answers' size and the CPU of serve, Prometheus and PostgreSQL per request.
//
// `make bench` builds bin/fleet-manager and runs it with the sizes;
// --quick (10 hubs x 300 clusters) tries it out in seconds; `make bench/reads`
// runs the read benchmark, `make bench/registrations` the registration one and
// `make bench/user-metrics` the user-facing metrics one.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts := defaultOptions()
	fs := pflag.NewFlagSet("fleet-bench", pflag.ContinueOnError)
	opts.addFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	opts.applyQuick(fs)
	if err := opts.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	runner := run
	switch {
	case opts.Reads:
		runner = runReads
	case opts.Registrations:
		runner = runRegistrations
	case opts.Pools:
		runner = runPools
	case opts.UserMetrics:
		runner = runUserMetrics
	}
	if err := runner(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
