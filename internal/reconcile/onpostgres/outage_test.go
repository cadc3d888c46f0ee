package onpostgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// outageDelivery is the agent delivery, whose first call finds the database
// gone: it stops the proxy the replica reaches the database through.
type outageDelivery struct {
	fleet.Delivery
	proxy *pgtest.Proxy
	once  sync.Once
	hit   chan struct{}
}

func (d *outageDelivery) Deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	d.once.Do(func() { d.proxy.Stop(); close(d.hit) })
	return d.Delivery.Deliver(ctx, hub, reg)
}

// TestPassLostToAnOutageGoesOnWhenTheDatabaseAnswers: a pass whose
// database goes away mid-delivery is not the registration's failure (no
// attempt counted, no backoff), and it goes on as soon as the database
// answers again, not at its lease's end.
func TestPassLostToAnOutageGoesOnWhenTheDatabaseAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hub("hub-outage", "eu", "eu-west-1", 5)
	proxy, viaProxy := pgtest.NewProxy(t, e.cfg)
	viaProxy.ConnectTimeout = time.Second
	replicaEnv := &env{t: t, cfg: viaProxy, store: e.store, scfg: e.scfg}
	delivery := &outageDelivery{proxy: proxy, hit: make(chan struct{})}
	replicaEnv.startReplica(replicaOptions{deliveries: func(store *postgres.Store) map[fleet.DeliveryMode]fleet.Delivery {
		delivery.Delivery = postgres.NewAgentDelivery(store)
		return map[fleet.DeliveryMode]fleet.Delivery{fleet.DeliveryAgent: delivery}
	}})
	reg := e.register("outage", "eu", "")
	select {
	case <-delivery.hit:
	case <-time.After(10 * time.Second):
		t.Fatalf("registration %s never reached its delivery", reg.ID)
	}
	// The outage lasts two seconds, well within the pass's time (the lease
	// is ten).
	<-time.After(2 * time.Second)
	proxy.Start()
	back := time.Now()
	e.eventually(reg.ID, 15*time.Second, cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished), "published")
	if waited := time.Since(back); waited > 3*time.Second {
		t.Errorf("registration published %s after the database came back, want within a few retries", waited)
	}
	db := pgtest.Open(t, e.cfg)
	if row := readQueueRow(t, db, reg.ID); row.Attempts != 0 || row.LastError != "" {
		t.Errorf("row after the outage = %+v, want no failed attempt counted", row)
	}
}
