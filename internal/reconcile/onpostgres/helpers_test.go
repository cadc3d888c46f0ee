package onpostgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/internal/stack"
)

// env is one database with the store the API would use.
type env struct {
	t     testing.TB
	cfg   postgres.Config
	store *postgres.Store
	scfg  postgres.StoreConfig
}

func newEnv(t testing.TB) *env {
	t.Helper()
	db, cfg := pgtest.NewMigratedDatabase(t)
	// The test hubs beat once, at creation; a timeout of an hour keeps them
	// ready however slowly a loaded machine runs the test (a minute once let
	// the hubs of the thousand-registration test go stale mid-test). Tests of
	// the timeout set their own.
	scfg := postgres.StoreConfig{MaxPageSize: 1000, IdempotencyKeyTTL: time.Hour, HeartbeatTimeout: time.Hour}
	return &env{t: t, cfg: cfg, store: postgres.NewStore(db, testKeyring(t), fleet.SystemClock{}, scfg, authz.MustDefault()), scfg: scfg}
}

func testKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	k, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// replica is one fleet-manager replica's reconcilers: its own pool, listener,
// queue and claim owner, as a separate process would have, running the set
// that serve runs.
type replica struct {
	store *postgres.Store
	svc   *stack.Stack
}

type replicaOptions struct {
	cfg        reconcile.Config
	deliveries func(store *postgres.Store) map[fleet.DeliveryMode]fleet.Delivery
	// queue, when set, wraps the replica's work queue.
	queue func(q *postgres.Queue) fleet.RegistrationQueue
	// observe, when set, is told of every statement the replica's pool runs.
	observe postgres.StatementObserver
}

func defaultReconcileConfig() reconcile.Config {
	cfg := reconcile.DefaultConfig()
	cfg.Lease, cfg.RemovalTimeout, cfg.StatsInterval = 10*time.Second, time.Hour, time.Second
	return cfg
}

func (e *env) startReplica(opts replicaOptions) *replica {
	e.t.Helper()
	cfg := stack.DefaultConfig()
	cfg.DB, cfg.Store, cfg.Reconcile, cfg.HeartbeatCheck = e.cfg, e.scfg, opts.cfg, time.Second
	if opts.cfg.Workers == 0 {
		cfg.Reconcile = defaultReconcileConfig()
	}
	// The env's store has no pool settings; pool_mgr and its queue scale as
	// serve's defaults say.
	cfg.Store.Pools.Scaler = fleet.DefaultScalerConfig()
	cfg.Queue = postgres.QueueConfig{BackoffBase: 50 * time.Millisecond, BackoffMax: time.Second}
	db := pgtest.Open(e.t, e.cfg)
	if opts.observe != nil {
		if err := db.ObserveStatements(opts.observe); err != nil {
			e.t.Fatal(err)
		}
	}
	parts := stack.Parts{
		DB: db, Keyring: testKeyring(e.t), Queue: opts.queue,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if opts.deliveries != nil {
		parts.Deliveries = func(store *postgres.Store) (map[fleet.DeliveryMode]fleet.Delivery, error) {
			return opts.deliveries(store), nil
		}
	}
	svc, err := stack.New(context.Background(), cfg, parts)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	r := &replica{store: svc.Store, svc: svc}
	e.t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() { r.svc.Stop() }

// hub registers an agent hub and sends its first heartbeat.
func (e *env) hub(name, zone, region string, capacity int) fleet.Hub {
	e.t.Helper()
	h, err := e.store.CreateHub(context.Background(), fleet.HubCreate{Name: name, Zone: zone, Region: region,
		DeliveryMode: fleet.DeliveryAgent, Capacity: capacity, AgentIdentity: name + "-agent"})
	if err != nil {
		e.t.Fatalf("CreateHub(%s): %v", name, err)
	}
	e.heartbeat(h, 0)
	return h
}

// heartbeat reports for hub's agent, acknowledging applied.
func (e *env) heartbeat(h fleet.Hub, applied int64) fleet.Hub {
	e.t.Helper()
	got, err := e.store.RecordHubHeartbeat(context.Background(), h.ID, h.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: applied})
	if err != nil {
		e.t.Fatalf("RecordHubHeartbeat(%s): %v", h.Name, err)
	}
	return got
}

// ackAll plays the agent of h: it acknowledges the hub's current revision.
func (e *env) ackAll(h fleet.Hub) {
	e.t.Helper()
	cur, err := e.store.FindHub(context.Background(), h.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	e.heartbeat(cur, cur.Revision)
}

var caller = fleet.Identity{OrgID: "org-1", Username: "alice"}

func (e *env) register(name, zone, region string) fleet.Registration {
	e.t.Helper()
	reg, _, err := e.store.CreateRegistration(context.Background(), caller,
		fleet.RegistrationCreate{Name: name, Zone: zone, Region: region, Product: fleet.ProductOCP}, "")
	if err != nil {
		e.t.Fatalf("CreateRegistration(%s): %v", name, err)
	}
	return reg
}

func (e *env) find(id string) (fleet.Registration, error) {
	return e.store.FindRegistration(context.Background(), caller.OrgID, id)
}

// eventually polls the registration until match holds.
func (e *env) eventually(id string, timeout time.Duration, match func(fleet.Registration) bool, what string) fleet.Registration {
	e.t.Helper()
	var last fleet.Registration
	gomega.NewWithT(e.t).Eventually(func() bool {
		r, err := e.find(id)
		last = r
		return err == nil && match(r)
	}).WithTimeout(timeout).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "registration %s never %s; last: %s", id, what, describe(last))
	return last
}

func describe(r fleet.Registration) string {
	s := fmt.Sprintf("phase %s", r.Phase)
	for _, c := range r.Conditions {
		s += fmt.Sprintf("; %s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

func cond(t string, status fleet.ConditionStatus, reason string) func(fleet.Registration) bool {
	return func(r fleet.Registration) bool {
		c, ok := r.Conditions.Get(t)
		return ok && c.Status == status && (reason == "" || c.Reason == reason)
	}
}
