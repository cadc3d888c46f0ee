package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
)

// recorder is a store and queue with nothing to do that reports each call a
// reconciler's pass starts with on calls.
type recorder struct {
	calls chan string
}

func (r recorder) record(call string) {
	select {
	case r.calls <- call:
	default:
	}
}

func (r recorder) ClaimRegistrations(_ context.Context, kind fleet.WorkKind, _ string, _ int, _ time.Duration) ([]fleet.Claim, error) {
	r.record("claim " + string(kind))
	return nil, nil
}
func (recorder) PlaceRegistrations(context.Context, []fleet.Claim, []fleet.DeliveryMode) ([]fleet.Placement, error) {
	return nil, nil
}
func (recorder) FindHub(context.Context, string) (fleet.Hub, error)                  { return fleet.Hub{}, nil }
func (recorder) ReleaseRegistrations(context.Context, string, []string) (int, error) { return 0, nil }
func (recorder) CompleteRegistration(context.Context, string, fleet.Outcome) (bool, error) {
	return true, nil
}
func (recorder) CompleteRegistrations(_ context.Context, done []fleet.Completion) ([]bool, error) {
	return make([]bool, len(done)), nil
}
func (recorder) NextDue(context.Context, fleet.WorkKind) (time.Duration, bool, error) {
	return 0, false, nil
}
func (recorder) WakeAcknowledged(context.Context, int) (int, bool, error) { return 0, false, nil }
func (r recorder) ListHubLiveness(context.Context) ([]fleet.HubLiveness, error) {
	r.record("hub_mgr")
	return nil, nil
}
func (recorder) SetHubReadyCondition(context.Context, string, fleet.Condition) error { return nil }
func (recorder) MarkInventoryStale(context.Context, string) error                    { return nil }
func (recorder) RequeueUnplaced(context.Context, []fleet.DeliveryMode, int) (int, error) {
	return 0, nil
}
func (r recorder) Stats(context.Context) (fleet.FleetStats, error) {
	r.record("housekeeping")
	return fleet.FleetStats{}, nil
}
func (recorder) PurgeIdempotencyKeys(context.Context) (int, error) { return 0, nil }
func (r recorder) PurgeTombstones(_ context.Context, table string, _ time.Time, _ int) (int, error) {
	r.record("tombstone_purge " + table)
	return 0, nil
}
func (r recorder) ResolvePolicies(context.Context) (int, error) {
	r.record("policy_resolver")
	return 0, nil
}
func (r recorder) ClaimPools(_ context.Context, _ string, woken []string, _ int, _ time.Duration) ([]fleet.PoolClaim, error) {
	r.record("pool_mgr " + strings.Join(woken, ","))
	return nil, nil
}
func (recorder) ApplyPoolPass(context.Context, fleet.PoolClaim, []fleet.ScaleAction, time.Duration, error) (bool, error) {
	return true, nil
}
func (recorder) ReleasePools(context.Context, string) (int, error) { return 0, nil }

// waitCalls fails t unless every call of want arrives on calls in time.
func waitCalls(t *testing.T, calls <-chan string, what string, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case call := <-calls:
			want = slices.DeleteFunc(want, func(w string) bool { return w == call })
		case <-deadline:
			t.Fatalf("%s: never saw %s", what, strings.Join(want, ", "))
		}
	}
}

// TestStartRunsEveryReconciler: the one entry point serve and the tests
// start the reconcilers with runs each of them, each woken by its own
// wake-up. A reconciler the entry point stops starting, or a wake-up it
// stops passing on, fails here.
func TestStartRunsEveryReconciler(t *testing.T) {
	t.Parallel()
	rec := recorder{calls: make(chan string, 1024)}
	cfg := reconcile.DefaultConfig()
	cfg.PolicyResolve = time.Millisecond // a wake-up right after the first pass resolves at once
	metrics, err := reconcile.NewMetrics("test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	provWake, delWake, hubWake, inventoryWake := make(chan string, 1), make(chan string, 1), make(chan string, 1), make(chan string, 1)
	poolWake := make(chan string, 1)
	running, err := reconcile.Start(t.Context(), reconcile.Set{
		Config: cfg, Stores: reconcile.Stores{Hubs: rec, Tombstones: rec, Policies: rec, Queue: rec, Pools: rec}, Deliveries: map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: nil},
		TombstoneTables: []string{"table_a", "table_b"},
		Wake:            reconcile.Wakeups{Provisioning: provWake, Deleting: delWake, Hubs: hubWake, Inventory: inventoryWake, Pools: poolWake},
		// Longer than the test: hub_mgr passes again only when woken.
		HeartbeatCheck: time.Hour,
		Clock:          fleet.SystemClock{}, Logger: slog.New(slog.DiscardHandler), Metrics: metrics,
	})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer running.Stop()

	waitCalls(t, rec.calls, "Start()'s first passes", "claim provision", "claim deprovision", "hub_mgr", "housekeeping",
		"tombstone_purge table_a", "tombstone_purge table_b", "policy_resolver", "pool_mgr ")
	for _, w := range []struct {
		wake          chan string
		payload, call string
	}{
		{provWake, "", "claim provision"}, {delWake, "", "claim deprovision"}, {hubWake, "", "hub_mgr"}, {inventoryWake, "", "policy_resolver"},
		// pool_mgr claims the pool a wake-up names, due or not.
		{poolWake, "pool-7", "pool_mgr pool-7"},
	} {
		w.wake <- w.payload
		waitCalls(t, rec.calls, "a wake-up for "+w.call, w.call)
	}
}

// TestStartRefusesAnIncompleteSet: a set without a dependency does not start
// a part of the reconcilers.
func TestStartRefusesAnIncompleteSet(t *testing.T) {
	t.Parallel()
	cfg := reconcile.DefaultConfig()
	cfg.Workers = 0
	running, err := reconcile.Start(t.Context(), reconcile.Set{Config: cfg})
	if err == nil {
		running.Stop()
		t.Fatal("Start(Set{}) = nil error, want one naming what is missing")
	}
	for _, want := range []string{"reconcile-workers", "no Hubs", "no Tombstones", "no Policies", "no Queue", "no Deliveries", "no TombstoneTables",
		"no HeartbeatCheck", "no Clock", "no Logger", "no Metrics"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start(Set{}) = %q, want it to name %q", err, want)
		}
	}
}

// TestSubscribeGivesEachReconcilerItsOwnChannel: every wake-up is a
// subscription of its own, to the channel of what wakes it.
func TestSubscribeGivesEachReconcilerItsOwnChannel(t *testing.T) {
	subscribed := map[<-chan string]string{}
	subscribe := func(channel string) <-chan string {
		c := make(chan string)
		subscribed[c] = channel
		return c
	}
	w := reconcile.Subscribe(subscribe, reconcile.Channels{Registrations: "regs", Hubs: "hubs", Inventory: "inv", Pools: "pools", DNS: "dns"})
	for name, got := range map[string]struct {
		c    <-chan string
		want string
	}{
		"Provisioning": {w.Provisioning, "regs"}, "Deleting": {w.Deleting, "regs"},
		"Hubs": {w.Hubs, "hubs"}, "Inventory": {w.Inventory, "inv"}, "Pools": {w.Pools, "pools"}, "DNS": {w.DNS, "dns"},
	} {
		if ch, ok := subscribed[got.c]; !ok || ch != got.want {
			t.Errorf("%s wake-up subscribed to %q (made by subscribe: %v), want %q", name, ch, ok, got.want)
		}
	}
	if len(subscribed) != 6 || w.Provisioning == w.Deleting {
		t.Errorf("%d subscriptions, want 6, one per wake-up", len(subscribed))
	}
}
