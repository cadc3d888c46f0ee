package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/spf13/pflag"
)

// options is the whole configuration of a run; every size is a flag.
type options struct {
	FleetManager string
	DB           dbOptions

	Hubs           int
	ClustersPerHub int
	BatchSize      int
	ChangeFraction float64
	HubCapacity    int

	Samples           int
	SampleGap         time.Duration
	PollWait          time.Duration
	DesiredDeltas     bool
	SampleTimeout     time.Duration
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration

	Reads           bool
	ReadDuration    time.Duration
	ReadConcurrency int
	Resources       int
	ReadsDatabase   string
	Policies        int

	Registrations       bool
	CreateDuration      time.Duration
	CreateCount         int
	CreateConcurrency   int
	CreateOrgs          int
	LoadedRegistrations int
	BulkRegistrations   int
	BulkClients         int
	BulkBatchSize       int
	DeliveryTimeout     time.Duration

	Quick        bool
	KeepDatabase bool
	ServerLog    string
	SamplesFile  string
	ServeArgs    []string
	ServeEnv     []string

	// Pools runs the capacity-pool benchmark: PoolCount pools of
	// PoolClusters clusters, and PoolSamples pools of 2 for the scaling samples.
	Pools        bool
	PoolCount    int
	PoolClusters int
	PoolSamples  int

	// UserMetrics runs the user-facing metrics benchmark: the proxy's
	// query and query_range against Prometheus directly, and the text
	// endpoint, for an organisation of MetricsOrgClusters clusters.
	UserMetrics          bool
	Prometheus           string
	MetricsOrgClusters   int
	MetricsOtherClusters int
	MetricsRequests      int
	MetricsTextRequests  int
	MetricsHistory       time.Duration
}

// dbOptions names the PostgreSQL server the benchmark database is created on.
type dbOptions struct {
	Host     string
	Port     int
	User     string
	Password string
}

func defaultOptions() options {
	return options{
		FleetManager:      "bin/fleet-manager",
		DB:                dbOptions{Host: "127.0.0.1", Port: 5432, User: "postgres", Password: os.Getenv("PGPASSWORD")},
		Hubs:              100,
		ClustersPerHub:    3000,
		BatchSize:         500,
		ChangeFraction:    0.01,
		HubCapacity:       100000,
		Samples:           200,
		SampleGap:         100 * time.Millisecond,
		PollWait:          30 * time.Second,
		DesiredDeltas:     true,
		SampleTimeout:     30 * time.Second,
		HeartbeatInterval: 15 * time.Second,
		HeartbeatTimeout:  10 * time.Minute,
		ReadDuration:      15 * time.Second,
		ReadConcurrency:   8,
		Resources:         1000000,
		Policies:          10,

		CreateDuration:      20 * time.Second,
		CreateConcurrency:   8,
		CreateOrgs:          20,
		LoadedRegistrations: 300000,
		BulkRegistrations:   300000,
		BulkClients:         4,
		BulkBatchSize:       1000,
		DeliveryTimeout:     10 * time.Minute,
		PoolCount:           200,
		PoolClusters:        10,
		PoolSamples:         50,

		Prometheus:           "prometheus",
		MetricsOrgClusters:   1000,
		MetricsOtherClusters: 4000,
		MetricsRequests:      1000,
		MetricsTextRequests:  200,
		MetricsHistory:       time.Hour,
	}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.FleetManager, "fleet-manager", o.FleetManager, "the fleet-manager binary to run (`make bench` builds it)")
	fs.StringVar(&o.DB.Host, "db-host", o.DB.Host, "PostgreSQL host; the benchmark database is created there")
	fs.IntVar(&o.DB.Port, "db-port", o.DB.Port, "PostgreSQL port")
	fs.StringVar(&o.DB.User, "db-user", o.DB.User, "PostgreSQL user; must be allowed to create databases")
	fs.StringVar(&o.DB.Password, "db-password", o.DB.Password, "PostgreSQL password (also read from PGPASSWORD)")
	fs.IntVar(&o.Hubs, "hubs", o.Hubs, "agent hubs, each with one simulated agent")
	fs.IntVar(&o.ClustersPerHub, "clusters-per-hub", o.ClustersPerHub, "managed clusters each agent reports")
	fs.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "clusters per inventory batch (at most 5000)")
	fs.Float64Var(&o.ChangeFraction, "change-fraction", o.ChangeFraction, "share of each hub's clusters the changes scenario changes")
	fs.IntVar(&o.HubCapacity, "hub-capacity", o.HubCapacity, "capacity of each hub")
	fs.IntVar(&o.Samples, "propagation-samples", o.Samples, "registrations created, one at a time, to time propagation")
	fs.DurationVar(&o.SampleGap, "propagation-gap", o.SampleGap, "pause between two registrations")
	fs.DurationVar(&o.PollWait, "poll-wait", o.PollWait, "wait of each agent long-poll")
	fs.BoolVar(&o.DesiredDeltas, "desired-deltas", o.DesiredDeltas,
		"agents ask for the changes since the revision they hold (`since`, as fleetshard-sync does) instead of the whole set each time")
	fs.DurationVar(&o.SampleTimeout, "propagation-timeout", o.SampleTimeout, "how long after the last registration its receipt is awaited")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "how often each agent sends its heartbeat")
	fs.DurationVar(&o.HeartbeatTimeout, "hub-heartbeat-timeout", o.HeartbeatTimeout, "serve's --hub-heartbeat-timeout")
	fs.BoolVar(&o.Reads, "reads", o.Reads, "run the read benchmark instead of the ingest phases: load the inventory by SQL, then time list, search, get and change-feed reads through the API")
	fs.DurationVar(&o.ReadDuration, "read-duration", o.ReadDuration, "how long each read scenario runs (--reads)")
	fs.IntVar(&o.ReadConcurrency, "read-concurrency", o.ReadConcurrency, "concurrent clients of each read scenario (--reads)")
	fs.IntVar(&o.Resources, "resources", o.Resources, "other resources loaded when the resources table is migrated (--reads)")
	fs.IntVar(&o.Policies, "policies", o.Policies, "with --reads: configuration policies created (half of an organisation with clusters, half of one without) before timing the policy resolver's passes; 0 skips it")
	fs.StringVar(&o.ReadsDatabase, "reads-database", o.ReadsDatabase, "with --reads: time the reads on this database, kept by an earlier --reads --keep-database run, instead of creating and loading one (it is kept; for trying changes, not for the figures of record)")
	fs.BoolVar(&o.Registrations, "registrations", o.Registrations, "run the registration benchmark instead of the ingest phases: creates (POST /clusters) at 100 and at --loaded-registrations rows, bulk onboarding (POST /clusters:batch), then list, search, get and import reads")
	fs.DurationVar(&o.CreateDuration, "create-duration", o.CreateDuration, "how long each create scenario posts (--registrations; unless --create-count)")
	fs.IntVar(&o.CreateCount, "create-count", o.CreateCount, "registrations each create scenario posts, instead of posting for --create-duration (--registrations)")
	fs.IntVar(&o.CreateConcurrency, "create-concurrency", o.CreateConcurrency, "concurrent clients of each create scenario (--registrations)")
	fs.IntVar(&o.CreateOrgs, "create-orgs", o.CreateOrgs, "organisations the many-organisations create scenarios post as (--registrations)")
	fs.IntVar(&o.LoadedRegistrations, "loaded-registrations", o.LoadedRegistrations, "registrations loaded by SQL into one organisation before the scenarios at fleet size (--registrations)")
	fs.IntVar(&o.BulkRegistrations, "bulk-registrations", o.BulkRegistrations, "registrations the bulk onboarding scenario sends through POST /clusters:batch; 0 skips it (--registrations)")
	fs.IntVar(&o.BulkClients, "bulk-clients", o.BulkClients, "concurrent clients of the bulk onboarding, each its own organisation (--registrations)")
	fs.IntVar(&o.BulkBatchSize, "bulk-batch-size", o.BulkBatchSize, "items per POST /clusters:batch (--registrations)")
	fs.DurationVar(&o.DeliveryTimeout, "delivery-timeout", o.DeliveryTimeout, "how long a scenario waits for its registrations to be Delivered (--registrations)")
	fs.BoolVar(&o.Quick, "quick", o.Quick, "try it out: 10 hubs x 300 clusters and 20 samples (with --reads: 10,000 resources, 2s a scenario; with --registrations: 3,000 loaded and 3,000 bulk registrations, 2s a scenario), unless those flags are given")
	fs.BoolVar(&o.KeepDatabase, "keep-database", o.KeepDatabase, "leave the benchmark database in place (for EXPLAIN), printing its name")
	fs.StringVar(&o.ServerLog, "server-log", o.ServerLog, "file the serve child's log is written to (default: a temporary file, removed)")
	fs.StringVar(&o.SamplesFile, "samples-file", o.SamplesFile, "CSV file the propagation samples are written to, one line each")
	fs.BoolVar(&o.Pools, "pools", o.Pools, "run the capacity-pool benchmark instead of the ingest phases: --pool-count pools of --pool-clusters clusters come up, then POST /clusters and reservations at --create-concurrency for --create-duration, then bookings that cross a node threshold, timed until the scaled MachinePool is in the hub's desired set")
	fs.IntVar(&o.PoolCount, "pool-count", o.PoolCount, "capacity pools created (--pools)")
	fs.IntVar(&o.PoolClusters, "pool-clusters", o.PoolClusters, "clusters of each pool (--pools)")
	fs.IntVar(&o.PoolSamples, "pool-samples", o.PoolSamples, "sample pools of 2 clusters, one booking crossing a node threshold each (--pools)")
	fs.BoolVar(&o.UserMetrics, "user-metrics", o.UserMetrics, "run the user-facing metrics benchmark instead of the ingest phases: load the inventory by SQL, give --metrics-org-clusters clusters to one organisation, feed a Prometheus child their series, then time query and query_range through the proxy and straight to Prometheus, and the text endpoint")
	fs.StringVar(&o.Prometheus, "prometheus", o.Prometheus, "the Prometheus binary --user-metrics starts (Debian's prometheus package)")
	fs.IntVar(&o.MetricsOrgClusters, "metrics-org-clusters", o.MetricsOrgClusters, "clusters of the organisation whose metrics are read (--user-metrics)")
	fs.IntVar(&o.MetricsOtherClusters, "metrics-other-clusters", o.MetricsOtherClusters, "other organisations' clusters whose series Prometheus holds too (--user-metrics)")
	fs.IntVar(&o.MetricsRequests, "metrics-requests", o.MetricsRequests, "requests of each query scenario, direct and through the proxy (--user-metrics)")
	fs.IntVar(&o.MetricsTextRequests, "metrics-text-requests", o.MetricsTextRequests, "requests of each text endpoint scenario (--user-metrics)")
	fs.DurationVar(&o.MetricsHistory, "metrics-history", o.MetricsHistory, "history of every series, one sample a minute, replayed into Prometheus; the range queries span it (--user-metrics)")
	fs.StringArrayVar(&o.ServeArgs, "serve-arg", o.ServeArgs, "extra flag for `serve`, e.g. --serve-arg=--db-max-open-conns=40 (repeatable)")
	fs.StringArrayVar(&o.ServeEnv, "serve-env", o.ServeEnv, "extra environment variable for `serve`, e.g. --serve-env=GOMEMLIMIT=150MiB (repeatable)")
}

// applyQuick shrinks the sizes the caller did not set when --quick is given.
func (o *options) applyQuick(fs *pflag.FlagSet) {
	if !o.Quick {
		return
	}
	for name, set := range map[string]func(){
		"hubs":                   func() { o.Hubs = 10 },
		"clusters-per-hub":       func() { o.ClustersPerHub = 300 },
		"propagation-samples":    func() { o.Samples = 20 },
		"resources":              func() { o.Resources = 10000 },
		"read-duration":          func() { o.ReadDuration = 2 * time.Second },
		"create-duration":        func() { o.CreateDuration = 2 * time.Second },
		"loaded-registrations":   func() { o.LoadedRegistrations = 3000 },
		"bulk-registrations":     func() { o.BulkRegistrations = 3000 },
		"delivery-timeout":       func() { o.DeliveryTimeout = 2 * time.Minute },
		"pool-count":             func() { o.PoolCount = 20 },
		"pool-samples":           func() { o.PoolSamples = 10 },
		"metrics-other-clusters": func() { o.MetricsOtherClusters = 1000 },
		"metrics-requests":       func() { o.MetricsRequests = 200 },
		"metrics-text-requests":  func() { o.MetricsTextRequests = 40 },
		"metrics-history":        func() { o.MetricsHistory = 10 * time.Minute },
	} {
		if !fs.Changed(name) {
			set()
		}
	}
}

func (o options) validate() error {
	var errs []error
	check := func(ok bool, flag, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("--%s: "+format, append([]any{flag}, args...)...))
		}
	}
	check(o.FleetManager != "", "fleet-manager", "is required")
	check(o.Hubs >= 1 && o.Hubs <= 999, "hubs", "must be between 1 and 999 (got %d)", o.Hubs)
	check(o.ClustersPerHub >= 1, "clusters-per-hub", "must be at least 1 (got %d)", o.ClustersPerHub)
	check(o.BatchSize >= 1 && o.BatchSize <= 5000, "batch-size", "must be between 1 and 5000 (got %d)", o.BatchSize)
	check(o.ChangeFraction > 0 && o.ChangeFraction <= 1, "change-fraction", "must be in (0, 1] (got %g)", o.ChangeFraction)
	check(o.changedPerHub() <= 5000, "change-fraction", "changes more than 5000 clusters per hub, one batch's bound")
	check(o.HubCapacity >= 1, "hub-capacity", "must be at least 1 (got %d)", o.HubCapacity)
	check(o.ReadDuration >= 100*time.Millisecond, "read-duration", "must be at least 100ms (got %s)", o.ReadDuration)
	check(o.ReadConcurrency >= 1, "read-concurrency", "must be at least 1 (got %d)", o.ReadConcurrency)
	check(o.ReadsDatabase == "" || o.Reads || o.UserMetrics, "reads-database", "needs --reads or --user-metrics")
	check(o.Policies >= 0, "policies", "must not be negative (got %d)", o.Policies)
	check(o.Resources >= 0, "resources", "must not be negative (got %d)", o.Resources)
	check(!o.Reads || !o.Registrations, "registrations", "and --reads are two benchmarks: give one")
	check(!o.Pools || !o.Reads && !o.Registrations, "pools", "is a benchmark of its own: give one of --pools, --reads, --registrations")
	check(!o.UserMetrics || !o.Reads && !o.Registrations && !o.Pools, "user-metrics",
		"is a benchmark of its own: give one of --user-metrics, --pools, --reads, --registrations")
	check(o.MetricsOrgClusters >= 1 && o.MetricsOrgClusters <= 5000, "metrics-org-clusters",
		"must be between 1 and 5000, serve's --user-metrics-max-clusters (got %d)", o.MetricsOrgClusters)
	check(o.MetricsOtherClusters >= 0, "metrics-other-clusters", "must not be negative (got %d)", o.MetricsOtherClusters)
	check(o.MetricsRequests >= 1 && o.MetricsTextRequests >= 1, "metrics-requests", "--metrics-requests and --metrics-text-requests must be at least 1")
	check(o.MetricsHistory >= 2*time.Minute && o.MetricsHistory <= 24*time.Hour, "metrics-history", "must be between 2m and 24h (got %s)", o.MetricsHistory)
	check(o.PoolCount >= 1 && o.PoolClusters >= 1 && o.PoolClusters <= maxPoolClusters && o.PoolSamples >= 1, "pool-count",
		"--pool-count and --pool-samples must be at least 1 and --pool-clusters 1 to %d", maxPoolClusters)
	check(o.CreateCount >= 0, "create-count", "must not be negative (got %d)", o.CreateCount)
	check(o.CreateCount > 0 || o.CreateDuration >= 100*time.Millisecond, "create-duration", "must be at least 100ms (got %s)", o.CreateDuration)
	check(o.CreateConcurrency >= 1, "create-concurrency", "must be at least 1 (got %d)", o.CreateConcurrency)
	check(o.CreateOrgs >= 2 && o.CreateOrgs <= 999, "create-orgs", "must be between 2 and 999 (got %d)", o.CreateOrgs)
	check(o.LoadedRegistrations >= initialRegistrations, "loaded-registrations", "must be at least %d, the rows of the first create scenarios (got %d)",
		initialRegistrations, o.LoadedRegistrations)
	check(o.BulkRegistrations >= 0, "bulk-registrations", "must not be negative (got %d)", o.BulkRegistrations)
	check(o.BulkClients >= 1, "bulk-clients", "must be at least 1 (got %d)", o.BulkClients)
	check(o.BulkBatchSize >= 1, "bulk-batch-size", "must be at least 1 (got %d)", o.BulkBatchSize)
	check(o.DeliveryTimeout >= time.Second, "delivery-timeout", "must be at least 1s (got %s)", o.DeliveryTimeout)
	check(!o.Registrations || o.registrationsPerHub() <= o.HubCapacity, "hub-capacity",
		"holds fewer than the %d loaded and bulk registrations each hub gets (got %d)", o.registrationsPerHub(), o.HubCapacity)
	check(o.Samples >= 1, "propagation-samples", "must be at least 1 (got %d)", o.Samples)
	check(o.PollWait >= time.Second && o.PollWait <= time.Minute, "poll-wait", "must be between 1s and 1m, serve's --agent-max-wait (got %s)", o.PollWait)
	check(o.HeartbeatInterval >= time.Second, "heartbeat-interval", "must be at least 1s (got %s)", o.HeartbeatInterval)
	check(o.HeartbeatTimeout > 2*o.HeartbeatInterval, "hub-heartbeat-timeout", "must be more than twice --heartbeat-interval")
	return errors.Join(errs...)
}

// maxPoolClusters is the API's bound on a pool's clusters.
const maxPoolClusters = 100

// changedPerHub is how many clusters of each hub the changes scenario changes.
func (o options) changedPerHub() int {
	return max(1, int(math.Round(o.ChangeFraction*float64(o.ClustersPerHub))))
}

// registrationsPerHub is how many loaded and bulk registrations each hub
// holds at the end of --registrations, the creates aside: they are spread
// evenly over the hubs.
func (o options) registrationsPerHub() int {
	return (o.LoadedRegistrations + o.BulkRegistrations + o.Hubs - 1) / max(o.Hubs, 1)
}

// totalClusters is the rows one full sync reports.
func (o options) totalClusters() int { return o.Hubs * o.ClustersPerHub }
