package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// registrationWorker drives one queue of registrations: claim a batch, run the
// reconciler on each (Workers at a time), record each outcome.
type registrationWorker struct {
	name      string
	kind      fleet.WorkKind
	queue     fleet.RegistrationQueue
	owner     string
	cfg       Config
	logger    *slog.Logger
	metrics   *Metrics
	reconcile func(ctx context.Context, c fleet.Claim) fleet.Outcome
}

// pass claims and reconciles one batch; it asks to run again at once when the
// batch was full, else when the next scheduled registration is due.
func (w *registrationWorker) pass(ctx context.Context) (time.Duration, bool) {
	claims, err := w.queue.ClaimRegistrations(ctx, w.kind, w.owner, w.cfg.BatchSize, w.cfg.Lease)
	if err != nil {
		w.logger.Error("claiming registrations", "error", err)
		return w.cfg.Resync / 10, true
	}
	sem := make(chan struct{}, w.cfg.Workers)
	var wg sync.WaitGroup
	for _, c := range claims {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.handle(ctx, c)
		}()
	}
	wg.Wait()
	if len(claims) == w.cfg.BatchSize {
		return 0, true
	}
	due, ok, err := w.queue.NextDue(ctx, w.kind)
	if err != nil {
		w.logger.Error("reading the next due registration", "error", err)
	}
	return due, ok
}

// handle reconciles one claimed registration and records the outcome.
func (w *registrationWorker) handle(ctx context.Context, c fleet.Claim) {
	start := time.Now()
	defer logPanic(w.logger, c.Registration.ID)
	out := w.reconcile(ctx, c)
	if ctx.Err() != nil {
		// Shutting down: the claim lapses at the end of its lease and another
		// replica (or this one, restarted) takes the registration over.
		return
	}
	kept, err := w.queue.CompleteRegistration(ctx, w.owner, out)
	outcome := outcomeDone
	switch {
	case err != nil:
		outcome = outcomeError
		w.logger.Error("recording a reconcile outcome", "registration", c.Registration.ID, "error", err)
	case !kept:
		outcome = outcomeLost
		w.logger.Warn("claim lost to another replica; outcome dropped", "registration", c.Registration.ID)
	case out.Err != nil:
		outcome = outcomeError
		w.logger.Warn("reconcile failed, backing off", "registration", c.Registration.ID, "attempts", c.Attempts+1, "error", out.Err)
	case out.RequeueAfter > 0:
		outcome = outcomeRequeued
	}
	w.metrics.duration.WithLabelValues(w.name, outcome).Observe(time.Since(start).Seconds())
}
