package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// registrationWorker drives one queue of registrations: claim a batch, run the
// reconciler on each (Workers at a time) and record each outcome, or, for a
// reconciler that works a batch at once, run it on the batch and record all
// the outcomes together.
type registrationWorker struct {
	name    string
	kind    fleet.WorkKind
	queue   fleet.RegistrationQueue
	owner   string
	cfg     Config
	logger  *slog.Logger
	metrics *Metrics
	// reconcile is the pass of one registration; reconcileBatch, when set,
	// the pass of a whole batch, one outcome per claim in order.
	reconcile      func(ctx context.Context, c fleet.Claim) fleet.Outcome
	reconcileBatch func(ctx context.Context, claims []fleet.Claim) []fleet.Outcome
	// wakeAcknowledged, when set, is how many acknowledged registrations a
	// pass wakes after its batch, for the next claim to take first
	// (RegistrationQueue.WakeAcknowledged).
	wakeAcknowledged int
	// held are the claims whose pass lost the database, freed when it
	// answers again.
	held heldClaims
}

// errPassUnfinished marks the outcome of a registration whose pass did not
// end (it panicked): nothing is recorded, and the claim lapses at its
// lease's end, so that a registration whose pass panics is not tried again
// at once.
var errPassUnfinished = &fleet.Error{Code: fleet.CodeUnavailable, Message: "the pass did not finish this registration"}

// pass claims and reconciles one batch; it asks to run again at once when the
// batch was full or claims wait to be freed, else when the next scheduled
// registration is due.
func (w *registrationWorker) pass(ctx context.Context) (time.Duration, bool) {
	var leaseEnd time.Time
	// The claim waits for the database. Each try first frees the claims
	// earlier passes lost the database with, so that this claim takes them
	// again at once.
	claims, err := untilAnswered(ctx, func(ctx context.Context) ([]fleet.Claim, error) {
		freed, err := w.held.release(ctx, w.queue.ReleaseRegistrations)
		if freed > 0 {
			w.logger.Info("freed claims a pass lost the database with", "registrations", freed)
		}
		if err != nil {
			return nil, err
		}
		// The leases start at the database's now(), after this instant: a
		// lease end counted from here comes before the real one whatever the
		// clocks say.
		leaseEnd = time.Now().Add(w.cfg.Lease)
		claims, err := w.queue.ClaimRegistrations(ctx, w.kind, w.owner, w.cfg.BatchSize, w.cfg.Lease)
		if err != nil {
			// The claim may hold rows it could not return: its token is
			// ours, so they are freed when the database answers.
			w.held.addClaims(claims, leaseEnd)
			return nil, err
		}
		return claims, nil
	})
	if err != nil {
		logFailure(ctx, w.logger, "claiming registrations", err)
		return w.cfg.Resync / 10, true
	}
	if w.reconcileBatch != nil && len(claims) > 0 {
		w.handleBatch(ctx, claims, leaseEnd)
	} else {
		sem := make(chan struct{}, w.cfg.Workers)
		var wg sync.WaitGroup
		for _, c := range claims {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				w.handle(ctx, c, leaseEnd)
			})
		}
		wg.Wait()
	}
	// Then what agents acknowledged, a batch a pass, which the next claim
	// takes first. It comes after the claim, so that the claim never waits
	// on what the wake-up reads (the hubs).
	acked := false
	if w.wakeAcknowledged > 0 && ctx.Err() == nil {
		woken, more, err := w.queue.WakeAcknowledged(ctx, w.wakeAcknowledged)
		if err != nil {
			logFailure(ctx, w.logger, "waking acknowledged registrations", err)
		}
		if woken > 0 {
			w.logger.Debug("woke acknowledged registrations", "registrations", woken, "more", more)
		}
		acked = woken > 0 || (more && err == nil)
	}
	if len(claims) == w.cfg.BatchSize || w.held.pending() || acked {
		return 0, true
	}
	due, ok, err := w.queue.NextDue(ctx, w.kind)
	if err != nil {
		logFailure(ctx, w.logger, "reading the next due registration", err)
		if fleet.ErrorCodeOf(err) == fleet.CodeUnavailable {
			// The next pass's claim waits for the database.
			return unavailableRetry, true
		}
	}
	return due, ok
}

// handle reconciles one claimed registration and records the outcome. The
// reconcile ends a fifth of the lease before the lease does (a hub that does
// not answer fails the pass, which then backs off), and recording the outcome
// must end with the lease: past it, another pass may hold the row.
func (w *registrationWorker) handle(ctx context.Context, c fleet.Claim, leaseEnd time.Time) {
	start := time.Now()
	defer logPanic(w.logger, c.Registration.ID)
	passCtx, cancelPass := context.WithDeadline(ctx, leaseEnd.Add(-w.cfg.Lease/5))
	defer cancelPass()
	if passCtx.Err() != nil {
		// Shutting down, or the batch's earlier passes used this claim's time
		// up: it lapses at its lease's end and the row is claimed again then.
		if ctx.Err() == nil {
			w.logger.Warn("lease ran out before the pass began; left to the next claim", "registration", c.Registration.ID)
			w.metrics.duration.WithLabelValues(w.name, outcomeLost).Observe(0)
		}
		return
	}
	// A pass that lost the database goes on when it answers again.
	out, _ := untilAnswered(passCtx, func(ctx context.Context) (fleet.Outcome, error) {
		out := w.reconcile(ctx, c)
		return out, out.Err
	})
	if ctx.Err() != nil {
		// Shutting down: the claim lapses at the end of its lease and another
		// replica (or this one, restarted) takes the registration over.
		return
	}
	if fleet.ErrorCodeOf(out.Err) == fleet.CodeUnavailable {
		// Out of reach for the whole pass: an outage, not the registration's
		// failure, so no backoff; the claim is freed when the database
		// answers, or lapses at its lease's end.
		w.logger.Warn("database unavailable for the whole pass; freed when it answers", "registration", c.Registration.ID, errAttrs(out.Err))
		w.metrics.duration.WithLabelValues(w.name, outcomeLost).Observe(time.Since(start).Seconds())
		w.held.add(c.Token, []string{c.Registration.ID}, leaseEnd)
		return
	}
	recordCtx, cancelRecord := context.WithDeadline(ctx, leaseEnd)
	defer cancelRecord()
	kept, err := untilAnswered(recordCtx, func(ctx context.Context) (bool, error) {
		return w.queue.CompleteRegistration(ctx, c.Token, out)
	})
	outcome := outcomeDone
	switch {
	case err != nil:
		outcome = outcomeError
		logFailure(ctx, w.logger, "recording a reconcile outcome", err, "registration", c.Registration.ID)
	case !kept:
		outcome = outcomeLost
		w.logger.Warn("claim lost to another pass; outcome dropped", "registration", c.Registration.ID)
	case out.Err != nil:
		outcome = outcomeError
		w.logger.Warn("reconcile failed, backing off", "registration", c.Registration.ID, "attempts", c.Attempts+1, errAttrs(out.Err))
	case out.RequeueAfter > 0:
		outcome = outcomeRequeued
	}
	w.metrics.duration.WithLabelValues(w.name, outcome).Observe(time.Since(start).Seconds())
}

// handleBatch reconciles a claimed batch at once and records its outcomes
// together, with the deadlines handle keeps: the pass ends a fifth of the
// lease before the lease does, the record by the lease's end. An outcome the
// database never answered for is not recorded: its claim is freed when the
// database answers, and the row is claimed again. One whose pass did not
// end (a panic) lapses at its lease's end.
func (w *registrationWorker) handleBatch(ctx context.Context, claims []fleet.Claim, leaseEnd time.Time) {
	start := time.Now()
	passCtx, cancelPass := context.WithDeadline(ctx, leaseEnd.Add(-w.cfg.Lease/5))
	defer cancelPass()
	if passCtx.Err() != nil {
		if ctx.Err() == nil {
			w.logger.Warn("lease ran out before the pass began; left to the next claim", "registrations", len(claims))
			w.observe(outcomeLost, 0, len(claims))
		}
		return
	}
	outs := func() (outs []fleet.Outcome) {
		defer logPanic(w.logger, fmt.Sprintf("a batch of %d", len(claims)))
		return w.reconcileBatch(passCtx, claims)
	}()
	if ctx.Err() != nil || len(outs) != len(claims) {
		// Shutting down, or the pass panicked: the claims lapse.
		return
	}
	var done []fleet.Completion
	var attempts []int
	var unanswered []fleet.Claim
	unfinished := 0
	for i, out := range outs {
		if fleet.ErrorCodeOf(out.Err) == fleet.CodeUnavailable {
			unfinished++
			if !errors.Is(out.Err, errPassUnfinished) {
				unanswered = append(unanswered, claims[i])
			}
			continue
		}
		done = append(done, fleet.Completion{Token: claims[i].Token, Outcome: out})
		attempts = append(attempts, claims[i].Attempts)
	}
	if len(unanswered) > 0 {
		w.logger.Warn("database unavailable for the whole pass; freed when it answers", "registrations", len(unanswered))
		w.held.addClaims(unanswered, leaseEnd)
	}
	if unfinished > len(unanswered) {
		w.logger.Warn("the pass did not end; left to the next claim", "registrations", unfinished-len(unanswered))
	}
	if len(done) == 0 {
		w.observe(outcomeLost, time.Since(start), unfinished)
		return
	}
	recordCtx, cancelRecord := context.WithDeadline(ctx, leaseEnd)
	defer cancelRecord()
	kept, err := untilAnswered(recordCtx, func(ctx context.Context) ([]bool, error) {
		return w.queue.CompleteRegistrations(ctx, done)
	})
	// The batch's time, shared among its registrations.
	each := time.Since(start) / time.Duration(len(claims))
	w.observe(outcomeLost, each, unfinished)
	if err != nil {
		logFailure(ctx, w.logger, "recording a batch of reconcile outcomes", err, "registrations", len(done))
		w.observe(outcomeError, each, len(done))
		return
	}
	for i, d := range done {
		outcome := outcomeDone
		switch out := d.Outcome; {
		case !kept[i]:
			outcome = outcomeLost
			w.logger.Warn("claim lost to another pass; outcome dropped", "registration", out.ID)
		case out.Err != nil:
			outcome = outcomeError
			w.logger.Warn("reconcile failed, backing off", "registration", out.ID, "attempts", attempts[i]+1, errAttrs(out.Err))
		case out.RequeueAfter > 0:
			outcome = outcomeRequeued
		}
		w.observe(outcome, each, 1)
	}
}

// observe records n reconciles of outcome that took d each.
func (w *registrationWorker) observe(outcome string, d time.Duration, n int) {
	for range n {
		w.metrics.duration.WithLabelValues(w.name, outcome).Observe(d.Seconds())
	}
}
