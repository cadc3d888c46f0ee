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
	"gorm.io/gorm"

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
	_, err = store.UpdateRegistration(ctx, fleet.Permitted, storeCaller.OrgID, reg.ID, nil, fleet.RegistrationUpdate{DisplayName: &display})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(wake).WithTimeout(10*time.Second).Should(gomega.Receive(gomega.Not(gomega.BeEmpty())), "a wake-up after UpdateRegistration")
	_, err = store.RequestRegistrationDeletion(ctx, fleet.Permitted, storeCaller.OrgID, reg.ID)
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

// TestWakeUpsFollowTheCommitByOneRule: a wake-up asked in a store
// transaction goes to the waker once the transaction committed, never when
// it rolled back, and is coalesced per channel where the subscribers read no
// payload and per payload where they do; one asked in a transaction the
// store did not begin is refused, not lost.
func TestWakeUpsFollowTheCommitByOneRule(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), quotaAuthorizer(t, 0))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cfg.DSN())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, ch := range []string{postgres.ChannelHubs, postgres.ChannelPools} {
		_, err = conn.Exec(ctx, "LISTEN "+ch)
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}

	err = db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return postgres.WakeAfterCommitForTest(tx, postgres.ChannelHubs, "outside")
	})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("outside a store transaction")), "a wake-up in a transaction the store did not begin")

	rolledBack := errors.New("rolled back")
	err = postgres.TransactForTest(ctx, store, func(wake func(channel, payload string) error) error {
		g.Expect(wake(postgres.ChannelPools, "rolled-back")).To(gomega.Succeed())
		return rolledBack
	})
	g.Expect(err).To(gomega.MatchError(rolledBack))
	g.Expect(postgres.WakeKeysForTest(store)).To(gomega.BeEmpty(), "the waker after a rolled-back transaction")

	err = postgres.TransactForTest(ctx, store, func(wake func(channel, payload string) error) error {
		for _, w := range [][2]string{{postgres.ChannelHubs, "hub-a"}, {postgres.ChannelHubs, "hub-b"},
			{postgres.ChannelPools, "pool-1"}, {postgres.ChannelPools, "pool-2"}, {postgres.ChannelPools, "pool-1"}} {
			if err := wake(w[0], w[1]); err != nil {
				return err
			}
		}
		g.Expect(postgres.WakeKeysForTest(store)).To(gomega.BeEmpty(), "the waker before the commit")
		return nil
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	want := []string{postgres.ChannelHubs + "/wake", postgres.ChannelPools + "/pool-1", postgres.ChannelPools + "/pool-2"}
	g.Expect(postgres.WakeKeysForTest(store)).To(gomega.Equal(want), "the waker after the commit")
	var got []string
	for len(got) < len(want) {
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wait)
		cancel()
		g.Expect(err).NotTo(gomega.HaveOccurred(), "notifications so far: %v", got)
		got = append(got, n.Channel+"/"+n.Payload)
	}
	g.Expect(got).To(gomega.ConsistOf(want), "the notifications sent")
}
