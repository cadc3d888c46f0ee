// Package readreplica routes the store's heavy reads to a streaming standby
// of the database while its staleness is proven within a bound, and to the
// primary otherwise: the optional read replica of `fleet-manager serve`
// (--db-read-replica-*, docs/database-read-replicas.md). The store takes it
// as its postgres.ReadRouter (Store.WithReplica).
package readreplica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// Replica routes the inventory's heavy reads to a streaming standby while
// its staleness is proven within the configured bound, and to the primary
// otherwise (docs/database-read-replicas.md).
//
// The staleness is measured without trusting either server's clock: Run
// samples the primary's WAL position with the local monotonic time taken
// before asking, then the replica's replay position. Every transaction that
// committed before a sample's time wrote its commit record below the
// sample's position, so once the replica has replayed past it, the replica
// holds every commit older than that time: it is at most now minus that time
// stale. The bound grows while nothing new is proven (the replica is down,
// behind, or the primary does not answer), so reads leave the replica by
// themselves.
type Replica struct {
	cfg     Config
	primary *postgres.DB
	replica *postgres.DB
	clock   fleet.Clock
	logger  *slog.Logger

	mu sync.Mutex
	// samples are the primary's WAL positions not yet replayed by the
	// replica, oldest first, none older than the bound.
	samples []walSample
	// covered is the time of the newest sample the replica has replayed:
	// every commit before it is on the replica. Zero: none yet.
	covered time.Time
	// problem is why the replica cannot serve now ("" when it can).
	problem string

	reads     *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
}

// walSample is the primary's WAL position and the local time before it was asked.
type walSample struct {
	at  time.Time
	lsn uint64
}

// Targets of the replica's metrics: bounded label values. The reads are
// labelled with the kind the store names (its read kinds are bounded too).
const (
	targetPrimary = "primary"
	targetReplica = "replica"
)

// The replica is the store's router of heavy reads.
var _ postgres.ReadRouter = (*Replica)(nil)

// New opens the replica's pool (none when cfg names no host) and
// registers its metrics with reg, prefixed with namespace, the service name.
// The pool does not connect until Run samples it.
func New(cfg Config, primaryCfg postgres.Config, primary *postgres.DB, clock fleet.Clock, logger *slog.Logger,
	namespace string, reg prometheus.Registerer) (*Replica, error) {
	r := &Replica{cfg: cfg, primary: primary, clock: clock, logger: logger.With("component", "read-replica"), problem: "no sample yet",
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "db", Name: "reads_total",
			Help: "Heavy inventory reads by read (inventory_list, inventory_feed, user_metrics) and the server that answered (primary, replica)."},
			[]string{"read", "target"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "db", Name: "replica_fallbacks_total",
			Help: "Heavy reads sent to the primary although a read replica is configured, by read and reason (stale, failed, short_page, behind_cursor)."},
			[]string{"read", "reason"}),
	}
	staleness := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "db", Name: "replica_staleness_seconds",
		Help: "Proven upper bound of the read replica's lag behind the primary; +Inf while unknown (replica down, not a standby, or no sample replayed)."},
		func() float64 {
			if d, ok := r.Staleness(); ok {
				return d.Seconds()
			}
			return math.Inf(1)
		})
	collectors := []prometheus.Collector{r.reads, r.fallbacks}
	if cfg.Enabled() {
		collectors = append(collectors, staleness)
		db, err := postgres.Open(cfg.DB(primaryCfg), logger)
		if err != nil {
			return nil, fmt.Errorf("readreplica.New(%s): %w", cfg.Host, err)
		}
		r.replica = db
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("readreplica.New: %w", err)
		}
	}
	return r, nil
}

// Close closes the replica's pool.
func (r *Replica) Close() error {
	if r == nil || r.replica == nil {
		return nil
	}
	return r.replica.Close()
}

// Run samples the primary and the replica every check interval until ctx
// ends. Without a replica it returns at once.
func (r *Replica) Run(ctx context.Context) {
	if r == nil || r.replica == nil {
		return
	}
	tick := time.NewTicker(r.cfg.CheckInterval)
	defer tick.Stop()
	for {
		r.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// check takes one sample of the primary, then reads how far the replica
// has replayed.
func (r *Replica) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.MaxStaleness)
	defer cancel()
	at := r.clock.Now()
	var lsn int64
	if err := r.primary.Gorm.WithContext(ctx).Raw(`SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`).Row().Scan(&lsn); err != nil {
		// Nothing new is proven: the bound grows until the primary answers.
		r.logger.Debug("sampling the primary's WAL position failed", "err", err)
		return
	}
	var replay *int64
	err := r.replica.Gorm.WithContext(ctx).Raw(`SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint`).Row().Scan(&replay)
	sample := walSample{at: at, lsn: uint64(lsn)}
	switch {
	case err != nil:
		r.record(sample, 0, "unreachable", err)
	case replay == nil:
		// A promoted or misconfigured server: its history may have forked.
		r.record(sample, 0, "not a standby", errors.New("pg_last_wal_replay_lsn() is null: the server is not in recovery"))
	default:
		r.record(sample, uint64(*replay), "", nil)
	}
}

// record keeps sample and moves covered to the newest sample at or below
// replayed; problem, when set, says why the replica cannot serve, and cause
// what failed. A change of problem is logged once.
func (r *Replica) record(sample walSample, replayed uint64, problem string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if problem != r.problem {
		if problem != "" {
			r.logger.Warn("read replica unusable: heavy reads go to the primary", "host", r.cfg.Host, "reason", problem, "err", cause)
		} else {
			r.logger.Info("read replica usable", "host", r.cfg.Host)
		}
		r.problem = problem
	}
	r.samples = append(r.samples, sample)
	if problem == "" {
		n := 0
		for n < len(r.samples) && r.samples[n].lsn <= replayed {
			n++
		}
		if n > 0 && r.samples[n-1].at.After(r.covered) {
			r.covered = r.samples[n-1].at
		}
		r.samples = r.samples[n:]
	}
	// A sample older than the bound cannot make the replica fresh.
	for len(r.samples) > 0 && sample.at.Sub(r.samples[0].at) > r.cfg.MaxStaleness {
		r.samples = r.samples[1:]
	}
}

// Staleness is the proven upper bound of the replica's lag behind the
// primary, false when none is known.
func (r *Replica) Staleness() (time.Duration, bool) {
	if r == nil || r.replica == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.problem != "" || r.covered.IsZero() {
		return 0, false
	}
	return r.clock.Now().Sub(r.covered), true
}

// Serving reports whether a replica is configured (--db-read-replica-host):
// only then may Read answer from a pool other than the primary's. False for
// a nil Replica.
func (r *Replica) Serving() bool { return r != nil && r.replica != nil }

// fresh returns the replica's pool when its staleness is within the bound.
func (r *Replica) fresh() (*postgres.DB, bool) {
	d, ok := r.Staleness()
	if !ok || d > r.cfg.MaxStaleness {
		return nil, false
	}
	return r.replica, true
}

// Read runs fn, the heavy read of kind, on the replica when it is fresh,
// else on the primary. A replica read that fails, or whose answer cannot
// stand (postgres.ErrReplicaShort, postgres.ErrReplicaBehind), runs again on
// the primary: a reader never sees an error because the replica is behind or
// down. An error that is the caller's (a bad search, an expired cursor) is
// returned as it is: the primary would refuse it too.
func (r *Replica) Read(ctx context.Context, kind string, fn func(db *postgres.DB) error) error {
	if r.replica == nil {
		r.reads.WithLabelValues(kind, targetPrimary).Inc()
		return fn(r.primary)
	}
	reason := "stale"
	if db, ok := r.fresh(); ok {
		err := fn(db)
		if err == nil {
			r.reads.WithLabelValues(kind, targetReplica).Inc()
			return nil
		}
		if callerError(err) || ctx.Err() != nil {
			return err
		}
		switch reason = "failed"; {
		case errors.Is(err, postgres.ErrReplicaShort):
			reason = "short_page"
		case errors.Is(err, postgres.ErrReplicaBehind):
			reason = "behind_cursor"
		default:
			r.logger.Warn("read replica failed a read: retrying on the primary", "read", kind, "err", err)
		}
	}
	r.fallbacks.WithLabelValues(kind, reason).Inc()
	r.reads.WithLabelValues(kind, targetPrimary).Inc()
	return fn(r.primary)
}

// callerError reports whether err is the caller's: a domain error other
// than unavailability.
func callerError(err error) bool {
	var fe *fleet.Error
	return errors.As(err, &fe) && fe.Code != fleet.CodeUnavailable
}
