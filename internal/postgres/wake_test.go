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
