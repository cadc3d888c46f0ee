package onpostgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// backoffBase is the queue's BackoffBase in startReplica.
const backoffBase = 50 * time.Millisecond

// queueRow is the work-queue state of a registration row.
type queueRow struct {
	Attempts  int
	LastError string
	// Pending is next_attempt_at > now(): the row waits out a backoff (or a lease).
	Pending bool
	Claimed bool
	// Backoff is next_attempt_at - updated_at in seconds: the wait the last
	// completion scheduled, while the row is not claimed.
	Backoff float64
	Phase   string
}

func readQueueRow(t *testing.T, db *postgres.DB, id string) queueRow {
	t.Helper()
	var r queueRow
	err := db.Gorm.Raw(`SELECT attempts, last_error, coalesce(next_attempt_at > now(), false) AS pending, claimed_by IS NOT NULL AS claimed,
	coalesce(extract(epoch FROM next_attempt_at - updated_at), 0)::float8 AS backoff, phase FROM registrations WHERE id = ?`, id).Take(&r).Error
	if err != nil {
		t.Fatalf("reading registration %s: %v", id, err)
	}
	return r
}

// deliveryCall is what the registration's row held when Deliver was called.
type deliveryCall struct {
	at  time.Time
	row queueRow
	err error
}

// flakyDelivery fails its first failures calls, then delivers. Each call
// records the row as the queue left it.
type flakyDelivery struct {
	db       *postgres.DB
	failures int
	mu       sync.Mutex
	calls    []deliveryCall
}

func (f *flakyDelivery) Deliver(ctx context.Context, _ fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	var r queueRow
	err := f.db.Gorm.WithContext(ctx).Raw(`SELECT attempts, last_error FROM registrations WHERE id = ?`, reg.ID).Take(&r).Error
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, deliveryCall{at: time.Now(), row: r, err: err})
	if n := len(f.calls); n <= f.failures {
		return fleet.DeliveryReport{}, fmt.Errorf("hub unreachable (call %d)", n)
	}
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonAcknowledged, Message: "delivered at last"}, nil
}

func (f *flakyDelivery) Withdraw(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error) {
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonRemoved}, nil
}

func (f *flakyDelivery) recorded() []deliveryCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]deliveryCall(nil), f.calls...)
}

func TestFailedDeliveryBacksOffThenSucceeds(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newEnv(t)
	e.hub("hub-flaky", "eu", "eu-west-1", 5)
	db := pgtest.Open(t, e.cfg)
	const failures = 4
	flaky := &flakyDelivery{db: db, failures: failures}
	e.startReplica(replicaOptions{deliveries: func(*postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: flaky}
	}})
	reg := e.register("flaky", "eu", "")

	// While it fails, the row carries the attempts, the error and a backoff.
	var mid queueRow
	g.Eventually(func() bool {
		mid = readQueueRow(t, db, reg.ID)
		return mid.Attempts >= 2 && mid.Pending && !mid.Claimed
	}).WithTimeout(10*time.Second).WithPolling(5*time.Millisecond).Should(gomega.BeTrue(), "registration %s never backed off twice", reg.ID)
	if want := fmt.Sprintf("hub unreachable (call %d)", mid.Attempts); mid.LastError != want || mid.Phase != string(fleet.PhaseProvisioning) {
		t.Errorf("row while failing = %+v, want last_error %q and phase provisioning", mid, want)
	}
	if got, want := secondsToDuration(mid.Backoff), backoffAfter(mid.Attempts); got < want-time.Millisecond || got > want+time.Millisecond {
		t.Errorf("backoff after failure %d = %s, want %s (base %s doubling)", mid.Attempts, got, want, backoffBase)
	}

	got := e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionTrue, fleet.ReasonAcknowledged), "delivered")
	if !got.Conditions.IsTrue(fleet.ConditionPlaced) || got.Phase != fleet.PhaseProvisioning {
		t.Errorf("delivered registration = %s, want placed and provisioning", describe(got))
	}
	if row := readQueueRow(t, db, reg.ID); row.Attempts != 0 || row.LastError != "" || row.Claimed {
		t.Errorf("row after a successful delivery = %+v, want attempts 0, no last_error, released", row)
	}

	calls := flaky.recorded()
	if len(calls) < failures+1 {
		t.Fatalf("Deliver called %d times, want %d", len(calls), failures+1)
	}
	for k, c := range calls[:failures+1] {
		wantErr := ""
		if k > 0 {
			wantErr = fmt.Sprintf("hub unreachable (call %d)", k)
		}
		if c.err != nil || c.row.Attempts != k || c.row.LastError != wantErr {
			t.Errorf("Deliver call %d saw attempts %d, last_error %q (%v); want %d, %q", k+1, c.row.Attempts, c.row.LastError, c.err, k, wantErr)
		}
		if k == 0 {
			continue
		}
		if gap := c.at.Sub(calls[k-1].at); gap < backoffAfter(k)-5*time.Millisecond {
			t.Errorf("Deliver call %d came %s after call %d, before the %s backoff ended", k+1, gap, k, backoffAfter(k))
		}
	}
}

// backoffAfter is the wait the queue schedules after the n-th failure in a row.
func backoffAfter(n int) time.Duration {
	return min(backoffBase*time.Duration(math.Pow(2, float64(n-1))), time.Second)
}

func secondsToDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// registrationEnd reads how a registration row ended.
type registrationEnd struct {
	Deleted    bool
	Waited     float64
	HubID      *string
	Phase      string
	Conditions string
}

func readRegistrationEnd(t *testing.T, db *postgres.DB, id string) (registrationEnd, fleet.Conditions) {
	t.Helper()
	var end registrationEnd
	err := db.Gorm.Raw(`SELECT deleted_at IS NOT NULL AS deleted,
	coalesce(extract(epoch FROM deleted_at - deletion_requested_at), 0)::float8 AS waited, hub_id, phase, conditions::text AS conditions
FROM registrations WHERE id = ?`, id).Take(&end).Error
	if err != nil {
		t.Fatalf("reading registration %s: %v", id, err)
	}
	var conds fleet.Conditions
	if err := json.Unmarshal([]byte(end.Conditions), &conds); err != nil {
		t.Fatalf("decoding the conditions of %s: %v", id, err)
	}
	return end, conds
}

func TestRemovalTimeoutForcesDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hub := e.hub("hub-mute", "eu", "eu-west-1", 5)
	db := pgtest.Open(t, e.cfg)
	cfg := defaultReconcileConfig()
	cfg.RemovalTimeout = time.Second
	e.startReplica(replicaOptions{cfg: cfg})
	reg := e.register("mute", "eu", "")
	e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished), "published")
	if h, _ := e.store.FindHub(context.Background(), hub.ID); h.PlacedCount != 1 {
		t.Errorf("hub placed count after placement = %d, want 1", h.PlacedCount)
	}
	if _, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, reg.ID); err != nil {
		t.Fatalf("RequestRegistrationDeletion(%s) = %v", reg.ID, err)
	}
	// The agent never acknowledges the withdrawal.
	var end registrationEnd
	var conds fleet.Conditions
	gomega.NewWithT(t).Eventually(func() bool {
		end, conds = readRegistrationEnd(t, db, reg.ID)
		return end.Deleted
	}).WithTimeout(15*time.Second).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "registration %s never deleted", reg.ID)
	if end.Waited < cfg.RemovalTimeout.Seconds() {
		t.Errorf("deleted %.3fs after the deletion request, before the %s removal timeout", end.Waited, cfg.RemovalTimeout)
	}
	if c, _ := conds.Get(fleet.ConditionDelivered); c.Status != fleet.ConditionFalse || c.Reason != fleet.ReasonForcedRemoval {
		t.Errorf("Delivered after a forced removal = %+v, want False %s", c, fleet.ReasonForcedRemoval)
	}
	if end.Phase != string(fleet.PhaseDeleted) {
		t.Errorf("phase after a forced removal = %s, want %s", end.Phase, fleet.PhaseDeleted)
	}
	if h, err := e.store.FindHub(context.Background(), hub.ID); err != nil || h.PlacedCount != 0 {
		t.Errorf("hub placed count after a forced removal = %d, %v; want 0", h.PlacedCount, err)
	}
	if _, err := e.find(reg.ID); fleet.ErrorCodeOf(err) != fleet.CodeNotFound {
		t.Errorf("FindRegistration(%s) after a forced removal = %v, want CodeNotFound", reg.ID, err)
	}
}

func TestUnplacedRegistrationIsDeletedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-elsewhere", "us", "us-east-1", 5)
	db := pgtest.Open(t, e.cfg)
	e.startReplica(replicaOptions{}) // RemovalTimeout is an hour
	reg := e.register("lonely", "eu", "")
	e.eventually(reg.ID, 10*time.Second, cond(fleet.ConditionPlaced, fleet.ConditionFalse, fleet.ReasonNoHubAvailable), "NoHubAvailable")
	got, err := e.store.RequestRegistrationDeletion(context.Background(), fleet.Permitted, caller.OrgID, reg.ID)
	if err != nil || got.Phase != fleet.PhaseDeprovisioning {
		t.Fatalf("RequestRegistrationDeletion(%s) = %s, %v; want deprovisioning", reg.ID, got.Phase, err)
	}
	var end registrationEnd
	var conds fleet.Conditions
	gomega.NewWithT(t).Eventually(func() bool {
		end, conds = readRegistrationEnd(t, db, reg.ID)
		return end.Deleted
	}).WithTimeout(5*time.Second).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "unplaced registration %s never deleted", reg.ID)
	if end.HubID != nil || end.Phase != string(fleet.PhaseDeleted) || end.Waited > 5 {
		t.Errorf("unplaced registration at its end = %+v, want no hub, phase deleted, deleted within seconds", end)
	}
	if _, ok := conds.Get(fleet.ConditionDelivered); ok {
		t.Errorf("unplaced registration's conditions = %+v, want no Delivered condition", conds)
	}
}
