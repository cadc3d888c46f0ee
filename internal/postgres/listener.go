package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listener holds one dedicated connection that LISTENs on the service's
// channels and fans each notification out to subscribers. After a lost
// connection it tries again every check interval, a cheap connect that a
// stopped server refuses at once, so wake-ups resume as soon as the database
// answers; it then wakes every subscriber, since notifications sent meanwhile
// are gone: a subscriber then re-reads what it watches.
type Listener struct {
	cfg      Config
	logger   *slog.Logger
	channels []string
	// check is how often a lost connection is tried again.
	check time.Duration

	mu   sync.Mutex
	subs map[string][]subscriber
}

// subscriber is one channel of Subscribe or SubscribePolling.
type subscriber struct {
	ch chan string
	// poll: woken at every check while the listener is down, too.
	poll bool
}

// ListenerApplicationSuffix ends the application_name of the listener's
// connection: the pool's name followed by it.
const ListenerApplicationSuffix = "/listener"

// NewListener returns a listener on channels; Run starts it.
func NewListener(cfg Config, logger *slog.Logger, channels ...string) *Listener {
	if cfg.ApplicationName != "" {
		// Its own name: pg_stat_activity tells the listener from the pool.
		cfg.ApplicationName += ListenerApplicationSuffix
	}
	return &Listener{cfg: cfg, logger: logger.With("component", "listener"), channels: channels,
		check: 500 * time.Millisecond, subs: map[string][]subscriber{}}
}

// Subscribe returns a channel that receives the payload of every notification
// on channel (and "" after a reconnect). It is buffered and never blocks the
// listener: a subscriber that lags sees fewer, not stale, wake-ups.
func (l *Listener) Subscribe(channel string) <-chan string { return l.subscribe(channel, false) }

// SubscribePolling is Subscribe for a level-triggered subscriber, such as a
// reconciler, that must not wait on wake-ups the listener cannot see: while
// the listener is down, it also receives "" at every check, so it polls.
func (l *Listener) SubscribePolling(channel string) <-chan string { return l.subscribe(channel, true) }

func (l *Listener) subscribe(channel string, poll bool) <-chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan string, 64)
	l.subs[channel] = append(l.subs[channel], subscriber{ch: ch, poll: poll})
	return ch
}

// Run listens until ctx ends. While the connection is lost it tries again
// every check, waking the polling subscribers each time.
func (l *Listener) Run(ctx context.Context) {
	var lostAt time.Time
	restored := func() {
		if !lostAt.IsZero() {
			l.logger.Info("notification connection restored", "after", time.Since(lostAt))
			lostAt = time.Time{}
		}
	}
	for ctx.Err() == nil {
		connected, err := l.listen(ctx, restored)
		if ctx.Err() != nil {
			return
		}
		if connected || lostAt.IsZero() {
			l.logger.Warn("notification connection lost, reconnecting", "error", err, "every", l.check)
			lostAt = time.Now()
		} else {
			l.logger.Debug("notification connection not restored", "error", err)
		}
		l.wake(true)
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.check):
		}
	}
}

// listen holds one connection until it fails; connected tells whether it
// got as far as listening.
func (l *Listener) listen(ctx context.Context, restored func()) (connected bool, err error) {
	conn, err := l.cfg.connect(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
	}
	restored()
	l.wake(false)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.publish(n.Channel, n.Payload)
	}
}

func (l *Listener) publish(channel, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sub := range l.subs[channel] {
		send(sub.ch, payload)
	}
}

// wake tells the subscribers (only the polling ones when pollersOnly) that
// notifications may have been missed.
func (l *Listener) wake(pollersOnly bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, subs := range l.subs {
		for _, sub := range subs {
			if sub.poll || !pollersOnly {
				send(sub.ch, "")
			}
		}
	}
}

// send delivers payload unless ch is full: its subscriber has wake-ups
// pending already.
func send(ch chan string, payload string) {
	select {
	case ch <- payload:
	default:
	}
}
