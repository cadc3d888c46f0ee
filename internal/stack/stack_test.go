package stack_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/stack"
)

// closingDelivery is a Delivery that holds a connection: it counts Close.
type closingDelivery struct{ closed atomic.Int32 }

func (*closingDelivery) Deliver(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error) {
	return fleet.DeliveryReport{}, errors.New("not delivered")
}

func (*closingDelivery) Withdraw(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error) {
	return fleet.DeliveryReport{}, errors.New("not withdrawn")
}

func (d *closingDelivery) Close() error { d.closed.Add(1); return nil }

// newHeldStack is a stack on a fresh database whose only delivery is a
// closingDelivery, its configuration the default as change leaves it.
func newHeldStack(t *testing.T, change func(*stack.Config)) (*stack.Stack, *closingDelivery) {
	t.Helper()
	db, dbCfg := pgtest.NewMigratedDatabase(t)
	cfg := stack.DefaultConfig()
	cfg.DB = dbCfg
	change(&cfg)
	held := &closingDelivery{}
	svc, err := stack.New(t.Context(), cfg, stack.Parts{DB: db,
		Deliveries: func(*postgres.Store) (map[fleet.DeliveryMode]fleet.Delivery, error) {
			return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: held}, nil
		}})
	if err != nil {
		t.Fatalf("New(): %v", err)
	}
	return svc, held
}

func TestNewRefusesAStackWithoutAPool(t *testing.T) {
	if _, err := stack.New(t.Context(), stack.DefaultConfig(), stack.Parts{}); err == nil {
		t.Fatal("New() without a DB: no error")
	}
}

// TestStackRunsTheReconcilersItIsConfiguredFor: a stack without an
// authenticator has no API; Start runs the reconcilers serve runs (a
// registration with no hub is marked NoHubAvailable through the stack's own
// store); Stop closes a delivery that holds a connection once, however
// often it is called.
func TestStackRunsTheReconcilersItIsConfiguredFor(t *testing.T) {
	svc, held := newHeldStack(t, func(cfg *stack.Config) { cfg.HeartbeatCheck = time.Second })
	if svc.API != nil {
		t.Error("a stack without an Authenticator has an API server")
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatalf("Start(): %v", err)
	}
	t.Cleanup(svc.Stop)
	reg, _, err := svc.Store.CreateRegistration(t.Context(), fleet.Identity{OrgID: "org-1", Username: "u"},
		fleet.RegistrationCreate{Name: "c1", Zone: "eu", Product: fleet.ProductOCP}, "")
	if err != nil {
		t.Fatalf("CreateRegistration(): %v", err)
	}
	gomega.NewWithT(t).Eventually(func() (string, error) {
		got, err := svc.Store.FindRegistration(t.Context(), "org-1", reg.ID)
		c, _ := got.Conditions.Get(fleet.ConditionPlaced)
		return c.Reason, err
	}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(gomega.Equal(fleet.ReasonNoHubAvailable),
		"the Placed condition the stack's reconcilers set")
	svc.Stop()
	svc.Stop()
	if n := held.closed.Load(); n != 1 {
		t.Errorf("delivery closed %d times, want 1", n)
	}
}

// TestStartRefusesAnInvalidReconcilerConfig: Start fails on a set
// reconcile.Start refuses, and what it had started is stopped: Stop
// afterwards returns at once and closes the deliveries once.
func TestStartRefusesAnInvalidReconcilerConfig(t *testing.T) {
	svc, held := newHeldStack(t, func(cfg *stack.Config) { cfg.Reconcile.Workers = 0 })
	if err := svc.Start(t.Context()); err == nil {
		t.Fatal("Start() with --reconcile-workers 0: no error")
	}
	svc.Stop()
	if n := held.closed.Load(); n != 1 {
		t.Errorf("delivery closed %d times, want 1", n)
	}
}
