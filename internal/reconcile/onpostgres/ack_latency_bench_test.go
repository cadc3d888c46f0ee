package onpostgres_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// The size and length of BenchmarkAcknowledgedDeliveredDuringOnboarding.
var (
	ackBacklog = flag.Int("ack-backlog", 100000, "due unplaced registrations BenchmarkAcknowledgedDeliveredDuringOnboarding starts with")
	ackWindow  = flag.Duration("ack-window", 90*time.Second, "how long BenchmarkAcknowledgedDeliveredDuringOnboarding lets the reconcilers work")
)

// BenchmarkAcknowledgedDeliveredDuringOnboarding measures how long a
// registration waits, once its hub's agent acknowledged the revision that
// carries it, before it is Delivered, while a backlog of due unplaced
// registrations (a bulk onboarding) is still being placed: one replica with
// the production reconcile defaults, 10 agent hubs of one zone whose agents
// acknowledge every new revision at once. After the window it reports the
// registrations acknowledged, those of them Delivered, the wait from the
// acknowledgement to Delivered (median and largest), and the age of the
// oldest acknowledged one still not Delivered.
//
//	go test -run '^$' -bench AcknowledgedDeliveredDuringOnboarding -benchtime 1x ./internal/reconcile/onpostgres \
//		-args -ack-backlog 100000 -ack-window 90s
func BenchmarkAcknowledgedDeliveredDuringOnboarding(b *testing.B) {
	n := *ackBacklog
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		db := pgtest.Open(b, e.cfg)
		const hubs = 10
		for i := range hubs {
			e.hub(fmt.Sprintf("hub-%02d", i), "eu", fmt.Sprintf("eu-%d", i%3), n/hubs+10)
		}
		insertRegistrations(b, e, db, n, "eu")
		if err := db.Gorm.Exec(`ANALYZE registrations`).Error; err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		agents := &ackRecorder{e: e, acks: map[string][]ackAt{}}
		b.StartTimer()
		start := time.Now()
		replica := e.startReplica(replicaOptions{cfg: benchReconcileConfig()})
		var agentsDone sync.WaitGroup
		agentsDone.Go(func() { agents.run(ctx, db) })
		<-time.After(*ackWindow) // the window measured: the benchmark waits for no condition
		b.StopTimer()
		replica.stop()
		cancel()
		agentsDone.Wait()
		end := time.Now()

		var rows []struct {
			HubID             string
			PublishedRevision int64
			DeliveredAt       *time.Time
		}
		if err := db.Gorm.Raw(`SELECT hub_id, published_revision, (SELECT (c->>'last_transition_time')::timestamptz
	FROM jsonb_array_elements(conditions) c WHERE c->>'type' = 'Delivered' AND c->>'status' = 'True') AS delivered_at
FROM registrations WHERE deleted_at IS NULL AND published_revision IS NOT NULL`).Scan(&rows).Error; err != nil {
			b.Fatal(err)
		}
		var waits []time.Duration
		acked, oldest := 0, time.Duration(0)
		for _, r := range rows {
			at, ok := agents.ackedAt(r.HubID, r.PublishedRevision)
			if !ok {
				continue
			}
			acked++
			if r.DeliveredAt == nil {
				oldest = max(oldest, end.Sub(at))
				continue
			}
			waits = append(waits, max(0, r.DeliveredAt.Sub(at)))
		}
		slices.Sort(waits)
		p50, worst := time.Duration(0), time.Duration(0)
		if len(waits) > 0 {
			p50, worst = waits[len(waits)/2], waits[len(waits)-1]
		}
		b.ReportMetric(float64(len(rows)), "published")
		b.ReportMetric(float64(acked), "acked")
		b.ReportMetric(float64(len(waits)), "delivered")
		b.ReportMetric(p50.Seconds(), "s-ack-to-delivered-p50")
		b.ReportMetric(worst.Seconds(), "s-ack-to-delivered-max")
		b.ReportMetric(oldest.Seconds(), "s-oldest-acked-undelivered")
		b.Logf("%d due unplaced at the start; after %s: %d published, %d acknowledged, %d of them Delivered "+
			"(ack to Delivered p50 %s, max %s); the oldest acknowledged not Delivered was acknowledged %s before the end",
			n, end.Sub(start).Round(time.Second), len(rows), acked, len(waits), p50, worst, oldest)
		b.StartTimer()
	}
}

// ackAt is one acknowledgement: the revision an agent applied, and when.
type ackAt struct {
	revision int64
	at       time.Time
}

// ackRecorder plays every hub's agent as fakeAgents does, acknowledging each
// new revision at once, and records when it acknowledged which revision.
type ackRecorder struct {
	e    *env
	mu   sync.Mutex
	acks map[string][]ackAt
}

func (a *ackRecorder) run(ctx context.Context, db *postgres.DB) {
	pollBehindHubs(ctx, db, 1, func(ctx context.Context, hubID, identity string) {
		set, err := a.e.store.DesiredSet(ctx, hubID, identity)
		if err != nil {
			return
		}
		if _, err := a.e.store.RecordHubHeartbeat(ctx, hubID, identity,
			fleet.HubHeartbeat{AgentVersion: "bench", AppliedRevision: set.Revision}); err != nil {
			return
		}
		a.mu.Lock()
		a.acks[hubID] = append(a.acks[hubID], ackAt{revision: set.Revision, at: time.Now()})
		a.mu.Unlock()
	})
}

// ackedAt is when the agent of hub first acknowledged revision or a later one.
func (a *ackRecorder) ackedAt(hub string, revision int64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ack := range a.acks[hub] {
		if ack.revision >= revision {
			return ack.at, true
		}
	}
	return time.Time{}, false
}
