package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestRegistrationWritesWakeTheReconcilers: a create, a change and a
// deregistration each reach a reconciler's subscription on the store's
// Listener after they return.
func TestRegistrationWritesWakeTheReconcilers(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), quotaAuthorizer(t, 0))
	listener := postgres.NewListener(cfg, slog.New(slog.DiscardHandler), postgres.ChannelRegistrations)
	wake := listener.SubscribePolling(postgres.ChannelRegistrations)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { listener.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	g.Eventually(wake).WithTimeout(10*time.Second).Should(gomega.Receive(gomega.Equal("")), "the listener's first connect")

	reg, _, err := store.CreateRegistration(ctx, storeCaller, fleet.RegistrationCreate{Name: "woken", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(wake).WithTimeout(10*time.Second).Should(gomega.Receive(gomega.Not(gomega.BeEmpty())), "a wake-up after CreateRegistration")
	display := "changed"
	_, err = store.UpdateRegistration(ctx, storeCaller.OrgID, reg.ID, nil, fleet.RegistrationUpdate{DisplayName: &display})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(wake).WithTimeout(10*time.Second).Should(gomega.Receive(gomega.Not(gomega.BeEmpty())), "a wake-up after UpdateRegistration")
	_, err = store.RequestRegistrationDeletion(ctx, storeCaller.OrgID, reg.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(wake).WithTimeout(10*time.Second).Should(gomega.Receive(gomega.Not(gomega.BeEmpty())), "a wake-up after RequestRegistrationDeletion")
}

// TestRegistrationWakeUpsAreCoalesced: a burst of creates sends far fewer
// notifications than creates: at most one per --wake-interval.
func TestRegistrationWakeUpsAreCoalesced(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	storeCfg := postgres.DefaultStoreConfig()
	storeCfg.WakeInterval = 500 * time.Millisecond
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, storeCfg, quotaAuthorizer(t, 0))
	conn, err := pgx.Connect(context.Background(), cfg.DSN())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(context.Background(), "LISTEN "+postgres.ChannelRegistrations)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	const creates = 100
	results := createConcurrently(store, creates, storeCaller, "", func(i int) fleet.RegistrationCreate {
		return fleet.RegistrationCreate{Name: fmt.Sprintf("burst-%03d", i), Zone: "eu", Product: fleet.ProductOCP}
	})
	for i, r := range results {
		g.Expect(r.err).NotTo(gomega.HaveOccurred(), "create %d of the burst", i)
	}
	// Notifications until none came for three intervals.
	notifications := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*storeCfg.WakeInterval)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(n.Channel).To(gomega.Equal(postgres.ChannelRegistrations))
		notifications++
	}
	g.Expect(notifications).To(gomega.And(gomega.BeNumerically(">=", 1), gomega.BeNumerically("<=", creates/10)),
		"notifications for a burst of %d creates", creates)
}

// TestStoreConfigValidateWakeInterval: --wake-interval is refused, by name,
// below 0 and above a minute, and parsed from the flag.
func TestStoreConfigValidateWakeInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag  string
		valid bool
	}{{"0s", true}, {"50ms", true}, {"1m", true}, {"-1ms", false}, {"2m", false}} {
		cfg := postgres.DefaultStoreConfig()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse([]string{"--wake-interval=" + tc.flag}); err != nil {
			t.Fatalf("Parse(--wake-interval=%s): %v", tc.flag, err)
		}
		err := cfg.Validate()
		if tc.valid && err != nil {
			t.Errorf("Validate(--wake-interval=%s) = %v, want nil", tc.flag, err)
		}
		if !tc.valid && (err == nil || !strings.Contains(err.Error(), "--wake-interval")) {
			t.Errorf("Validate(--wake-interval=%s) = %v, want an error naming --wake-interval", tc.flag, err)
		}
	}
}

// TestDeliveriesWakeTheirHubsAfterCommit: a publication and a withdrawal
// wake the long-polls of their own hub (the hub id as the payload, one hub's
// not coalesced with another's), and a heartbeat that acknowledges a
// publication wakes the reconcilers, each after its transaction committed.
func TestDeliveriesWakeTheirHubsAfterCommit(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), quotaAuthorizer(t, 0))
	ctx := context.Background()
	hubs := map[string]fleet.Hub{}
	for _, name := range []string{"hub-a", "hub-b"} {
		h, err := store.CreateHub(ctx, fleet.HubCreate{Name: name, Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent,
			Capacity: 10, AgentIdentity: "agent-" + name})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		hubs[name] = h
		g.Expect(db.Gorm.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id, generation)
VALUES (?, 'org-a', 'u', ?, 'eu', 'ocp', 'accepted', ?, 1)`, "r-"+name, "c-"+name, h.ID).Error).To(gomega.Succeed())
	}
	conn, err := pgx.Connect(ctx, cfg.DSN())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, ch := range []string{postgres.ChannelHubRevision, postgres.ChannelRegistrations} {
		_, err = conn.Exec(ctx, "LISTEN "+ch)
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	next := func() string {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "a notification")
		return n.Channel + " " + n.Payload
	}

	delivery := postgres.NewAgentDelivery(store)
	report, err := delivery.Deliver(ctx, hubs["hub-a"], fleet.Registration{ID: "r-hub-a"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonPublished))
	_, err = delivery.Withdraw(ctx, hubs["hub-b"], fleet.Registration{ID: "r-hub-b"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect([]string{next(), next()}).To(gomega.ConsistOf(
		postgres.ChannelHubRevision+" "+hubs["hub-a"].ID, postgres.ChannelHubRevision+" "+hubs["hub-b"].ID))

	_, err = store.RecordHubHeartbeat(ctx, hubs["hub-a"].ID, "agent-hub-a", fleet.HubHeartbeat{AgentVersion: "test", AgentStartGeneration: 1, AppliedRevision: 1})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(next()).To(gomega.HavePrefix(postgres.ChannelRegistrations+" "), "the acknowledgement wakes the reconcilers")
}
