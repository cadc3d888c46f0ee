package postgres_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestListenerReconnectsAsSoonAsTheDatabaseAnswers: after an outage of
// several seconds the listener is back within a check of the database's
// return (no backoff grown during the outage), and wakes every subscriber;
// during the outage only the polling subscribers are woken, at every check.
func TestListenerReconnectsAsSoonAsTheDatabaseAnswers(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	direct := pgtest.NewDatabase(t)
	proxy, cfg := pgtest.NewProxy(t, direct)
	cfg.ConnectTimeout = time.Second
	listener := postgres.NewListener(cfg, slog.New(slog.DiscardHandler), postgres.ChannelHubs)
	plain, polling := listener.Subscribe(postgres.ChannelHubs), listener.SubscribePolling(postgres.ChannelHubs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { listener.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	admin := pgtest.Open(t, direct)
	notify := func(payload string) {
		t.Helper()
		if err := admin.Gorm.Exec("SELECT pg_notify(?, ?)", postgres.ChannelHubs, payload).Error; err != nil {
			t.Fatalf("pg_notify(): %v", err)
		}
	}
	// next returns the next payload of ch within timeout, or "timeout".
	next := func(ch <-chan string, timeout time.Duration) string {
		select {
		case p := <-ch:
			return p
		case <-time.After(timeout):
			return "timeout"
		}
	}
	if p, q := next(plain, 5*time.Second), next(polling, 5*time.Second); p != "" || q != "" {
		t.Fatalf("first connect woke the subscribers with %q and %q, want \"\"", p, q)
	}
	notify("hub-1")
	if p, q := next(plain, 5*time.Second), next(polling, 5*time.Second); p != "hub-1" || q != "hub-1" {
		t.Fatalf("notification reached the subscribers as %q and %q, want hub-1", p, q)
	}

	proxy.Stop()
	// The outage lasts eight checks, long enough for a doubling backoff to
	// have reached several seconds; the polling subscriber sees every check.
	for i := range 8 {
		if q := next(polling, 5*time.Second); q != "" {
			t.Fatalf("check %d of the outage: the polling subscriber got %q, want \"\"", i, q)
		}
	}
	if len(plain) != 0 {
		t.Errorf("during the outage the plain subscriber got %d wake-ups, want none", len(plain))
	}

	proxy.Start()
	back := time.Now()
	if p := next(plain, 5*time.Second); p != "" {
		t.Fatalf("after the outage the plain subscriber got %q, want the reconnect's \"\"", p)
	}
	if waited := time.Since(back); waited > 1500*time.Millisecond {
		t.Errorf("listener reconnected %s after the database came back, want within a check or two", waited)
	}
	g.Eventually(func() string {
		notify("hub-2")
		return next(plain, 200*time.Millisecond)
	}).WithTimeout(5 * time.Second).Should(gomega.Equal("hub-2"))
}
