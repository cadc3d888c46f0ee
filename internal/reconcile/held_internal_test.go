package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// scriptedQueue is a registration queue that answers from a script and
// logs its calls in order.
type scriptedQueue struct {
	fleet.RegistrationQueue
	mu sync.Mutex
	// claims answers each ClaimRegistrations in turn (then nothing).
	claims []scriptedClaim
	// releaseDown is how many ReleaseRegistrations find the database away.
	releaseDown int
	calls       []string
}

type scriptedClaim struct {
	claims []fleet.Claim
	err    error
}

func (q *scriptedQueue) log(call string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, call)
}

func (q *scriptedQueue) ClaimRegistrations(context.Context, fleet.WorkKind, string, int, time.Duration) ([]fleet.Claim, error) {
	q.log("claim")
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.claims) == 0 {
		return nil, nil
	}
	next := q.claims[0]
	q.claims = q.claims[1:]
	return next.claims, next.err
}

func (q *scriptedQueue) ReleaseRegistrations(_ context.Context, token string, ids []string) (int, error) {
	q.mu.Lock()
	down := q.releaseDown > 0
	q.releaseDown--
	q.mu.Unlock()
	if down {
		q.log("release: unavailable")
		return 0, unavailable("ReleaseRegistrations()")
	}
	q.log(fmt.Sprintf("release %s %v", token, ids))
	return len(ids), nil
}

func (q *scriptedQueue) CompleteRegistrations(_ context.Context, done []fleet.Completion) ([]bool, error) {
	ids := make([]string, len(done))
	for i, d := range done {
		ids[i] = d.Outcome.ID
	}
	q.log(fmt.Sprintf("complete %v", ids))
	return make([]bool, len(done)), nil
}

func (q *scriptedQueue) NextDue(context.Context, fleet.WorkKind) (time.Duration, bool, error) {
	return 0, false, nil
}
func (*scriptedQueue) WakeAcknowledged(context.Context, int) (int, bool, error) { return 0, false, nil }

func (q *scriptedQueue) recorded() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

func claimsOf(token string, ids ...string) []fleet.Claim {
	claims := make([]fleet.Claim, len(ids))
	for i, id := range ids {
		claims[i] = fleet.Claim{Registration: fleet.Registration{ID: id}, Token: token}
	}
	return claims
}

func scriptedWorker(t *testing.T, q *scriptedQueue, batch func(context.Context, []fleet.Claim) []fleet.Outcome) *registrationWorker {
	t.Helper()
	metrics, err := NewMetrics("held_test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	return &registrationWorker{name: "provisioning_mgr", kind: fleet.WorkProvision, queue: q, owner: "o", cfg: cfg,
		logger: slog.New(slog.DiscardHandler), metrics: metrics, reconcileBatch: batch}
}

// TestPassFreesWhatTheDatabaseNeverTookWhenItAnswers: a batch whose pass
// never reached the database records nothing; the next pass frees its
// claims (by their token) as soon as the database answers, before it
// claims again, and leaves a registration whose pass did not end (a panic)
// to its lease.
func TestPassFreesWhatTheDatabaseNeverTookWhenItAnswers(t *testing.T) {
	t.Parallel()
	q := &scriptedQueue{claims: []scriptedClaim{{claims: claimsOf("o/1", "a", "b", "c", "d")}}, releaseDown: 1}
	w := scriptedWorker(t, q, func(_ context.Context, claims []fleet.Claim) []fleet.Outcome {
		outs := make([]fleet.Outcome, len(claims))
		for i, c := range claims {
			outs[i] = fleet.Outcome{ID: c.Registration.ID, Err: unavailable("PlaceRegistrations()")}
		}
		outs[2].Err = errPassUnfinished
		outs[3].Err = nil
		return outs
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if again, wish := w.pass(ctx); again != 0 || !wish {
		t.Errorf("pass that left claims to free = (%s, %v); want to pass again at once", again, wish)
	}
	w.pass(ctx)
	want := []string{"claim", "complete [d]", "release: unavailable", "release o/1 [a b]", "claim"}
	if got := q.recorded(); !slices.Equal(got, want) {
		t.Errorf("queue calls = %q; want %q", got, want)
	}
	if w.held.pending() {
		t.Errorf("claims still held after they were freed")
	}
}

// TestClaimCutShortFreesWhatItHeldWhenTheDatabaseAnswers: a claim whose
// answer was lost returns the rows it may hold; the pass waits for the
// database, frees them and claims again, in that order.
func TestClaimCutShortFreesWhatItHeldWhenTheDatabaseAnswers(t *testing.T) {
	t.Parallel()
	q := &scriptedQueue{claims: []scriptedClaim{
		{claims: claimsOf("o/1", "a", "b"), err: unavailable("ClaimRegistrations()")},
		{err: unavailable("ClaimRegistrations()")},
		{claims: claimsOf("o/3", "a", "b")},
	}, releaseDown: 1}
	w := scriptedWorker(t, q, func(_ context.Context, claims []fleet.Claim) []fleet.Outcome {
		outs := make([]fleet.Outcome, len(claims))
		for i, c := range claims {
			outs[i] = fleet.Outcome{ID: c.Registration.ID}
		}
		return outs
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.pass(ctx)
	want := []string{"claim", "release: unavailable", "release o/1 [a b]", "claim", "claim", "complete [a b]"}
	if got := q.recorded(); !slices.Equal(got, want) {
		t.Errorf("queue calls = %q; want %q", got, want)
	}
}

// TestHeldClaimPastItsLeaseIsForgotten: rows whose lease ended are due by
// themselves, so freeing them asks nothing of the database.
func TestHeldClaimPastItsLeaseIsForgotten(t *testing.T) {
	t.Parallel()
	var h heldClaims
	h.add("o/1", []string{"a"}, time.Now().Add(-time.Second))
	h.add("o/2", []string{"b"}, time.Now().Add(time.Minute))
	var freed []string
	n, err := h.release(context.Background(), func(_ context.Context, token string, ids []string) (int, error) {
		freed = append(freed, token)
		return len(ids), nil
	})
	if err != nil || n != 1 || !slices.Equal(freed, []string{"o/2"}) || h.pending() {
		t.Errorf("release = %d, %v, freed %q, pending %v; want 1 row of o/2 only, nothing left", n, err, freed, h.pending())
	}
}

// TestPoolAndZoneClaimCutShortIsFreedByItsToken: pool_mgr's and dns_mgr's
// claim gives each try a token of its own as the owner; a try that failed
// is freed by that token when the database answers, before the claim is
// tried again.
func TestPoolAndZoneClaimCutShortIsFreedByItsToken(t *testing.T) {
	t.Parallel()
	var (
		h      heldClaims
		tokens []string
		calls  []string
		down   = 1
	)
	free := func(_ context.Context, token string) (int, error) {
		if down > 0 {
			down--
			calls = append(calls, "release: unavailable")
			return 0, unavailable("ReleasePools()")
		}
		calls = append(calls, "release "+token)
		return 1, nil
	}
	claim := func(_ context.Context, token string) ([]string, error) {
		tokens = append(tokens, token)
		calls = append(calls, "claim "+token)
		if len(tokens) == 1 {
			return nil, unavailable("ClaimPools()")
		}
		return []string{"p1"}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	got, leaseEnd, err := claimHeld(ctx, &h, "mgr", time.Minute, free, claim)
	if err != nil || !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("claimHeld = %v, %v; want [p1]", got, err)
	}
	if len(tokens) != 2 || tokens[0] == tokens[1] || !strings.HasPrefix(tokens[0], "mgr/") {
		t.Fatalf("claim tokens %q; want two, each its own after the owner", tokens)
	}
	want := []string{"claim " + tokens[0], "release: unavailable", "release " + tokens[0], "claim " + tokens[1]}
	if !slices.Equal(calls, want) {
		t.Errorf("calls = %q; want %q", calls, want)
	}
	if leaseEnd.Before(before.Add(time.Minute)) || h.pending() {
		t.Errorf("lease end %s (want from the try that claimed, after %s), pending %v", leaseEnd, before.Add(time.Minute), h.pending())
	}
}
