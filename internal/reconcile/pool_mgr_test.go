package reconcile_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
)

// heldPools is a pool queue whose pool "p1" is held by another pass for
// the first held claims that name it; it records what each claim was woken
// for and which pools were applied.
type heldPools struct {
	mu      sync.Mutex
	held    int
	woken   [][]string
	applied []string
}

func (q *heldPools) ClaimPools(_ context.Context, _ string, woken []string, _ int, _ time.Duration) ([]fleet.PoolClaim, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.woken = append(q.woken, slices.Clone(woken))
	if !slices.Contains(woken, "p1") {
		return nil, nil
	}
	if q.held > 0 {
		q.held--
		return nil, nil
	}
	return []fleet.PoolClaim{{Input: fleet.ScalerInput{Pool: fleet.CapacityPool{ID: "p1", MinClusters: 0, MaxClusters: 1}}, Token: "t"}}, nil
}

func (q *heldPools) ReleasePools(context.Context, string) (int, error) { return 0, nil }

func (q *heldPools) ApplyPoolPass(_ context.Context, c fleet.PoolClaim, _ []fleet.ScaleAction, _ time.Duration, _ error) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.applied = append(q.applied, c.Input.Pool.ID)
	return true, nil
}

// TestPoolManagerRetriesAWokenPoolAnotherPassHolds: a booking's wake-up
// names a pool another pass holds (it read the pool before the booking);
// pool_mgr tries that pool again until it claims it, instead of leaving the
// booking to the resync, and then forgets it.
func TestPoolManagerRetriesAWokenPoolAnotherPassHolds(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	metrics, err := reconcile.NewMetrics("test", prometheus.NewRegistry())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg := reconcile.DefaultConfig()
	cfg.PoolResync = time.Hour // only wake-ups and retries pass
	q := &heldPools{held: 3}
	m := reconcile.NewPoolManager(cfg, fleet.DefaultScalerConfig(), q, "test", slog.New(slog.DiscardHandler), metrics)
	wake := make(chan string, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { m.Run(ctx, wake); close(done) }()
	defer func() { cancel(); <-done }()

	wake <- "p1"
	g.Eventually(func() []string {
		q.mu.Lock()
		defer q.mu.Unlock()
		return slices.Clone(q.applied)
	}).WithTimeout(5 * time.Second).Should(gomega.Equal([]string{"p1"}))
	q.mu.Lock()
	named := 0
	for _, w := range q.woken {
		if slices.Contains(w, "p1") {
			named++
		}
	}
	q.mu.Unlock()
	g.Expect(named).To(gomega.Equal(4), "three claims while held, one that took it")
	g.Consistently(func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.woken)
	}).WithTimeout(300*time.Millisecond).WithPolling(50*time.Millisecond).Should(gomega.BeNumerically("<=", 5), "claimed, the pool is not tried again")
}
