package onpostgres_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// stuckDelivery never answers: Deliver returns only when its context ends,
// and reports the context's deadline once. With onlyFirst, only its first
// delivery is stuck, and every later one is delivered at once.
type stuckDelivery struct {
	calls      chan stuckCall
	onlyFirst  bool
	deliveries atomic.Int32
}

type stuckCall struct {
	at          time.Time
	deadline    time.Time
	hasDeadline bool
}

func (s *stuckDelivery) Deliver(ctx context.Context, _ fleet.Hub, _ fleet.Registration) (fleet.DeliveryReport, error) {
	if s.onlyFirst && s.deliveries.Add(1) > 1 {
		return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonAcknowledged, Message: "delivered"}, nil
	}
	deadline, ok := ctx.Deadline()
	select {
	case s.calls <- stuckCall{at: time.Now(), deadline: deadline, hasDeadline: ok}:
	default:
	}
	<-ctx.Done()
	return fleet.DeliveryReport{}, ctx.Err()
}

func (s *stuckDelivery) Withdraw(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error) {
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonRemoved}, nil
}

// TestPassEndsBeforeItsLease gives a pass a hub that never answers: the pass
// has a deadline inside its lease, fails when it passes, and records the
// failure while it still holds the claim, instead of running on while the
// lease lapses and another pass takes the row.
func TestPassEndsBeforeItsLease(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newEnv(t)
	e.hub("hub-stuck", "eu", "eu-west-1", 5)
	db := pgtest.Open(t, e.cfg)
	cfg := defaultReconcileConfig()
	cfg.Lease = 4 * time.Second
	stuck := &stuckDelivery{calls: make(chan stuckCall, 1)}
	e.startReplica(replicaOptions{cfg: cfg, deliveries: func(*postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: stuck}
	}})
	reg := e.register("stuck", "eu", "")

	var call stuckCall
	g.Eventually(stuck.calls).WithTimeout(10 * time.Second).Should(gomega.Receive(&call))
	if !call.hasDeadline {
		t.Fatalf("Deliver's context has no deadline; want one inside the lease of %s", cfg.Lease)
	}
	if left := call.deadline.Sub(call.at); left <= 0 || left >= cfg.Lease {
		t.Errorf("Deliver's context ends %s after the call; want within the lease of %s", left, cfg.Lease)
	}
	// The failure is recorded by the pass itself, within the lease: the row
	// is released, backing off, with the deadline as its error.
	var row struct {
		Attempts  int
		LastError string
		UpdatedAt time.Time
	}
	g.Eventually(func() int {
		if err := db.Gorm.Raw(`SELECT attempts, last_error, updated_at FROM registrations WHERE id = ?`, reg.ID).Scan(&row).Error; err != nil {
			t.Fatal(err)
		}
		return row.Attempts
	}).WithTimeout(2*cfg.Lease).WithPolling(20*time.Millisecond).ShouldNot(gomega.BeZero(), "the stuck pass's failure was never recorded")
	if !strings.Contains(row.LastError, context.DeadlineExceeded.Error()) {
		t.Errorf("last_error after the stuck pass = %q, want the pass's deadline (%v)", row.LastError, context.DeadlineExceeded)
	}
	// The pass's deadline is a fifth of the lease before the lease's end (the
	// database and the test share the machine's clock). A later pass may have
	// failed too by the time the row is read; only the first is checked.
	if leaseEnd := call.deadline.Add(cfg.Lease / 5); row.Attempts == 1 && row.UpdatedAt.After(leaseEnd) {
		t.Errorf("the failure was recorded at %s, after the lease's end at %s", row.UpdatedAt, leaseEnd)
	}
}

// TestDeliveryPastThePassDeadlineIsDeferred runs a batch of two
// registrations one delivery at a time; the first delivery never answers,
// so the second's turn comes after the pass's deadline. The second is not
// started, and its placement is recorded with the first's failure, due
// again at once, instead of its claim lapsing until the lease's end; the
// next pass delivers it.
func TestDeliveryPastThePassDeadlineIsDeferred(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newEnv(t)
	e.hub("hub-slow", "eu", "eu-west-1", 5)
	db := pgtest.Open(t, e.cfg)
	first, second := e.register("first", "eu", ""), e.register("second", "eu", "")
	cfg := defaultReconcileConfig()
	cfg.Lease, cfg.Workers = 4*time.Second, 1
	e.startReplica(replicaOptions{cfg: cfg, deliveries: func(*postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: &stuckDelivery{calls: make(chan stuckCall, 1), onlyFirst: true}}
	}})

	type recorded struct {
		ID                 string
		Attempts           int
		ObservedGeneration int64
	}
	var rows []recorded
	g.Eventually(func() int {
		g.Expect(db.Gorm.Raw(`SELECT id, attempts, observed_generation FROM registrations WHERE id IN ?`,
			[]string{first.ID, second.ID}).Scan(&rows).Error).To(gomega.Succeed())
		return rows[0].Attempts + rows[1].Attempts
	}).WithTimeout(3*cfg.Lease).WithPolling(20*time.Millisecond).ShouldNot(gomega.BeZero(), "the stuck delivery's failure was never recorded")
	// The batch delivers in claim order; the one delivered second is the
	// one deferred, recorded in the same transaction as the failure, not
	// left to lapse.
	stuck, deferred := rows[0], rows[1]
	if deferred.Attempts > 0 {
		stuck, deferred = deferred, stuck
	}
	g.Expect(stuck.Attempts).To(gomega.Equal(1))
	g.Expect(deferred).To(gomega.Equal(recorded{ID: deferred.ID, ObservedGeneration: second.Generation}))
	e.eventually(deferred.ID, 2*cfg.Lease, func(r fleet.Registration) bool {
		c, ok := r.Conditions.Get(fleet.ConditionDelivered)
		return ok && c.Status == fleet.ConditionTrue
	}, "the deferred registration delivered")
}
