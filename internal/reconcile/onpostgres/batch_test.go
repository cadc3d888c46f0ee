package onpostgres_test

import (
	"context"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// hubRevisions reads the revision of each named hub.
func hubRevisions(t *testing.T, e *env, hubs ...fleet.Hub) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, h := range hubs {
		got, err := e.store.FindHub(context.Background(), h.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = got.Revision
	}
	return out
}

// TestBatchPlacesEachRegistrationOnceAndSpreadsTheLoad has one pass take
// 600 registrations of a zone with four hubs of different sizes, a cordoned
// hub and a hub of another zone: each is placed exactly once, no hub is
// filled past its capacity, every hub of the zone ends equally loaded for its
// size, the cordoned hub and the other zone take none, and each hub's desired
// set moves once for the whole batch (not once per registration). The
// agents' acknowledgements then deliver them all without another revision.
func TestBatchPlacesEachRegistrationOnceAndSpreadsTheLoad(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newEnv(t)
	capacity := map[string]int{"hub-a": 100, "hub-b": 150, "hub-c": 200, "hub-d": 300}
	var hubs []fleet.Hub
	for _, name := range []string{"hub-a", "hub-b", "hub-c", "hub-d"} {
		hubs = append(hubs, e.hub(name, "eu", "eu-west-1", capacity[name]))
	}
	cordoned := e.hub("hub-cordoned", "eu", "eu-west-1", 600)
	if _, err := e.store.SetHubCordoned(context.Background(), cordoned.ID, true); err != nil {
		t.Fatal(err)
	}
	e.hub("hub-us", "us", "eu-west-1", 600)
	const n = 600
	registerMany(t, e, n, "eu")
	cfg := defaultReconcileConfig()
	cfg.BatchSize = 1000 // the whole zone in one claim
	e.startReplica(replicaOptions{cfg: cfg})

	g.Eventually(func() map[fleet.Phase]int { return countPhases(t, e) }).WithTimeout(fleetDeadline).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(map[fleet.Phase]int{fleet.PhaseProvisioning: n}), "every registration placed and published")
	sum := 0
	for name, c := range placedCounts(t, e) {
		if c[0] != c[1] || c[0] > capacity[name] {
			t.Errorf("hub %s: placed count %d, registrations on it %d; want equal and at most its capacity %d", name, c[0], c[1], capacity[name])
		}
		// n of the zone's 750 places: each hub 80% full, to a place.
		if want := float64(n) / 750; capacity[name] > 0 && math.Abs(float64(c[0])/float64(capacity[name])-want) > 1.0/float64(capacity[name]) {
			t.Errorf("hub %s holds %d of %d places; want %.0f%% of them, as every hub of the zone", name, c[0], capacity[name], want*100)
		}
		sum += c[0]
	}
	if sum != n {
		t.Errorf("placements = %d, want %d (each registration placed exactly once)", sum, n)
	}
	want := map[string]int64{"hub-a": 1, "hub-b": 1, "hub-c": 1, "hub-d": 1}
	if got := hubRevisions(t, e, hubs...); !maps.Equal(got, want) {
		t.Errorf("hub revisions after one batch = %v, want %v: one each", got, want)
	}

	for _, h := range hubs {
		e.ackAll(h)
	}
	g.Eventually(func() int { return countDelivered(t, e) }).WithTimeout(fleetDeadline).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(n), "every registration delivered after the agents acknowledged")
	if got := hubRevisions(t, e, hubs...); !maps.Equal(got, want) {
		t.Errorf("hub revisions after the acknowledgements = %v, want %v: no new revision", got, want)
	}
}

// TestTwoReplicasBatchesNeverOverfillAHub has two replicas, each claiming
// batches of 200, place 400 registrations on hubs with 180 places in all, at
// the same time: every place is taken, none twice, and the rest wait.
func TestTwoReplicasBatchesNeverOverfillAHub(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	capacity := map[string]int{"hub-small": 40, "hub-medium": 60, "hub-large": 80}
	for name, c := range capacity {
		e.hub(name, "eu", "eu-west-1", c)
	}
	registerMany(t, e, 400, "eu")
	cfg := defaultReconcileConfig()
	cfg.BatchSize = 200
	e.startReplica(replicaOptions{cfg: cfg})
	e.startReplica(replicaOptions{cfg: cfg})
	gomega.NewWithT(t).Eventually(func() map[fleet.Phase]int { return countPhases(t, e) }).WithTimeout(fleetDeadline).WithPolling(100 * time.Millisecond).
		Should(gomega.Equal(map[fleet.Phase]int{fleet.PhaseProvisioning: 180, fleet.PhaseAccepted: 220}))
	for name, c := range placedCounts(t, e) {
		if want := capacity[name]; c != [2]int{want, want} {
			t.Errorf("hub %s: placed %v, want %d (its capacity)", name, c, want)
		}
	}
}

// stealingQueue is the work queue, except that before the first placement of
// a batch of three or more it lets another pass take the claim of the batch's
// middle registration.
type stealingQueue struct {
	*postgres.Queue
	db     *postgres.DB
	once   sync.Once
	stolen chan string
}

func (q *stealingQueue) PlaceRegistrations(ctx context.Context, claims []fleet.Claim, modes []fleet.DeliveryMode) ([]fleet.Placement, error) {
	if len(claims) >= 3 {
		q.once.Do(func() {
			id := claims[len(claims)/2].Registration.ID
			if err := q.db.Gorm.Exec(`UPDATE registrations SET claimed_by = 'thief/' || gen_random_uuid(),
	claimed_until = now() + interval '1 hour', next_attempt_at = now() + interval '1 hour' WHERE id = ?`, id).Error; err != nil {
				panic(err)
			}
			q.stolen <- id
		})
	}
	return q.Queue.PlaceRegistrations(ctx, claims, modes)
}

// TestLostClaimInABatchPlacesNothingForIt: a registration whose claim another
// pass took between the batch's claim and its placement is neither placed
// nor written by the batch, while the rest of the batch is.
func TestLostClaimInABatchPlacesNothingForIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-eu", "eu", "eu-west-1", 50)
	db := pgtest.Open(t, e.cfg)
	ids := registerMany(t, e, 9, "eu")
	stolen := make(chan string, 1)
	e.startReplica(replicaOptions{queue: func(q *postgres.Queue) fleet.RegistrationQueue {
		return &stealingQueue{Queue: q, db: db, stolen: stolen}
	}})
	var thief string
	select {
	case thief = <-stolen:
	case <-time.After(fleetDeadline):
		t.Fatal("no batch of three or more was placed")
	}
	for _, id := range ids {
		if id != thief {
			e.eventually(id, 10*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished), "published")
		}
	}
	var row struct {
		HubID     *string
		ClaimedBy string
		Placed    string
	}
	if err := db.Gorm.Raw(`SELECT hub_id, claimed_by, coalesce((SELECT c->>'reason' FROM jsonb_array_elements(conditions) c WHERE c->>'type' = 'Placed'), '') AS placed
FROM registrations WHERE id = ?`, thief).Scan(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.HubID != nil || row.Placed != fleet.ReasonNotPlaced || len(row.ClaimedBy) < 6 || row.ClaimedBy[:6] != "thief/" {
		t.Errorf("registration whose claim was lost = hub %v, Placed reason %q, claimed by %q; want unplaced, untouched, the thief's",
			row.HubID, row.Placed, row.ClaimedBy)
	}
	if counts := placedCounts(t, e); counts["hub-eu"] != [2]int{8, 8} {
		t.Errorf("hub-eu placements = %v, want the 8 registrations whose claims held", counts["hub-eu"])
	}
}

// batchAckingDelivery is the agent delivery whose agent acknowledges each
// batch before the pass ends: the wake-up lands while the claims hold.
type batchAckingDelivery struct {
	*postgres.AgentDelivery
	ack     func(fleet.Hub)
	batches atomic.Int32
}

func (d *batchAckingDelivery) DeliverBatch(ctx context.Context, hub fleet.Hub, regs []fleet.Registration) ([]fleet.DeliveryResult, error) {
	d.batches.Add(1)
	results, err := d.AgentDelivery.DeliverBatch(ctx, hub, regs)
	d.ack(hub)
	return results, err
}

// TestWakeUpDuringABatchPassIsNotLost: acknowledgements that arrive while a
// batch is claimed make its registrations due again at once, not at the
// next resync, and the batch delivery is the one used.
func TestWakeUpDuringABatchPassIsNotLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-eu", "eu", "eu-west-1", 5)
	delivery := &batchAckingDelivery{ack: e.ackAll}
	ids := registerMany(t, e, 3, "eu")
	e.startReplica(replicaOptions{deliveries: func(store *postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		delivery.AgentDelivery = postgres.NewAgentDelivery(store)
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: delivery}
	}})
	// The resync is minutes away: only the wake-up can make this in time.
	for _, id := range ids {
		e.eventually(id, 5*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionTrue, fleet.ReasonAcknowledged), "delivered")
	}
	if delivery.batches.Load() == 0 {
		t.Error("DeliverBatch never called; want the agent hub's batch delivery used")
	}
}
