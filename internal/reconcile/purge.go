package reconcile

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// maxPurgeBatches bounds one pass, so a large backlog is worked off in
// passes that each end soon; a pass that hits the bound asks to run again.
const maxPurgeBatches = 100

// TombstoneStore deletes inventory tombstones.
type TombstoneStore interface {
	// PurgeTombstones deletes up to limit tombstones of table deleted before
	// cutoff, records the purge horizon for the change feed, and returns how
	// many it deleted. Errors: CodeValidation for an unknown table.
	PurgeTombstones(ctx context.Context, table string, cutoff time.Time, limit int) (int, error)
}

// TombstonePurge deletes the inventory's tombstones once they are older than
// the retention, in batches; any number of replicas may run it side by side
// (each batch skips the rows another holds).
type TombstonePurge struct {
	cfg     Config
	store   TombstoneStore
	tables  []string
	clock   fleet.Clock
	logger  *slog.Logger
	metrics *Metrics
}

// NewTombstonePurge returns the purge of tables (the store's own list,
// postgres.TombstoneTables, in production).
func NewTombstonePurge(cfg Config, store TombstoneStore, tables []string, clock fleet.Clock, logger *slog.Logger, metrics *Metrics) *TombstonePurge {
	return &TombstonePurge{cfg: cfg, store: store, tables: tables, clock: clock,
		logger: logger.With("reconciler", "tombstone_purge"), metrics: metrics}
}

// Run purges every StatsInterval until ctx ends.
func (p *TombstonePurge) Run(ctx context.Context) {
	loop(ctx, "tombstone_purge", nil, p.cfg.StatsInterval, p.pass)
}

// pass purges each table; it asks to run again at once when a table still
// had a full batch left.
func (p *TombstonePurge) pass(ctx context.Context) (time.Duration, bool) {
	more := false
	for _, table := range p.tables {
		n, full, err := p.PurgeTable(ctx, table)
		if err != nil {
			logFailure(ctx, p.logger, "purging tombstones", err, "table", table)
		} else if n > 0 {
			p.logger.Info("purged tombstones", "table", table, "count", n)
		}
		more = more || full
	}
	return 0, more
}

// PurgeTable deletes table's tombstones older than the retention, batch by
// batch, up to maxPurgeBatches; full tells whether the last batch was full
// (there may be more).
func (p *TombstonePurge) PurgeTable(ctx context.Context, table string) (n int, full bool, err error) {
	start := time.Now()
	outcome := outcomeDone
	defer func() {
		p.metrics.duration.WithLabelValues("tombstone_purge", outcome).Observe(time.Since(start).Seconds())
	}()
	cutoff := p.clock.Now().Add(-p.cfg.TombstoneRetention)
	for range maxPurgeBatches {
		got, err := p.store.PurgeTombstones(ctx, table, cutoff, p.cfg.TombstonePurgeBatch)
		n += got
		p.metrics.purged.WithLabelValues(table).Add(float64(got))
		if err != nil {
			outcome = outcomeError
			return n, false, err
		}
		if got < p.cfg.TombstonePurgeBatch {
			return n, false, nil
		}
	}
	return n, true, nil
}
