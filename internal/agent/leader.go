package agent

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLeaseLost is returned by Run when the agent could not renew the hub's
// lease in time: another agent may act on the hub now, so this one stopped.
// The process exits and its restart campaigns again.
var ErrLeaseLost = errors.New("the hub's lease was lost")

// runElected waits until the agent holds the hub's lease, then runs lead
// until ctx ends or the lease is lost. The lease is released only once lead
// returned, so two agents never act on the hub at once; a standby then
// takes over within a retry period instead of a lease duration.
func (a *Agent) runElected(ctx context.Context, lead func(context.Context)) error {
	// The elector outlives ctx until lead stopped: its end releases the lease.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	leading := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: a.cfg.Lease(), Namespace: a.leaseNamespace},
			Client:     a.hub.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: a.identity},
		},
		LeaseDuration:   a.cfg.LeaseDuration,
		RenewDeadline:   a.cfg.LeaseRenewDeadline,
		RetryPeriod:     a.cfg.LeaseRetryPeriod,
		ReleaseOnCancel: true,
		Name:            "fleetshard-sync",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) { leading <- lctx },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("runElected: %w", err)
	}
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.Run(electorCtx)
	}()
	a.logger.Info("waiting for the hub's lease", "lease", a.leaseNamespace+"/"+a.cfg.Lease(), "identity", a.identity)
	select {
	case <-ctx.Done():
		stopElector()
		<-electorDone
		return nil
	case lctx := <-leading:
		a.logger.Info("hub's lease acquired, acting on the hub", "lease", a.leaseNamespace+"/"+a.cfg.Lease(), "identity", a.identity)
		a.setLeading(true)
		runCtx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(lctx, cancel)
		lead(runCtx)
		stop()
		cancel()
		lost := lctx.Err() != nil && ctx.Err() == nil
		a.setLeading(false)
		stopElector()
		<-electorDone
		if lost {
			a.logger.Error("hub's lease lost, stopped acting on the hub", "lease", a.leaseNamespace+"/"+a.cfg.Lease())
			return ErrLeaseLost
		}
		return nil
	}
}

// setLeading records whether this agent acts on the hub.
func (a *Agent) setLeading(on bool) {
	a.leading.Store(on)
	v := 0.0
	if on {
		v = 1
	}
	a.metrics.leader.Set(v)
}
