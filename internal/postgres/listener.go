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
// connection it reconnects and wakes every subscriber, since notifications
// sent meanwhile are gone: a subscriber then re-reads what it watches.
type Listener struct {
	cfg      Config
	logger   *slog.Logger
	channels []string
	backoff  time.Duration

	mu   sync.Mutex
	subs map[string][]chan string
}

// NewListener returns a listener on channels; Run starts it.
func NewListener(cfg Config, logger *slog.Logger, channels ...string) *Listener {
	return &Listener{cfg: cfg, logger: logger.With("component", "listener"), channels: channels,
		backoff: time.Second, subs: map[string][]chan string{}}
}

// Subscribe returns a channel that receives the payload of every notification
// on channel (and "" after a reconnect). It is buffered and never blocks the
// listener: a subscriber that lags sees fewer, not stale, wake-ups.
func (l *Listener) Subscribe(channel string) <-chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan string, 64)
	l.subs[channel] = append(l.subs[channel], ch)
	return ch
}

// Run listens until ctx ends, reconnecting with backoff.
func (l *Listener) Run(ctx context.Context) {
	wait := l.backoff
	for ctx.Err() == nil {
		connected, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			wait = l.backoff // the connection had worked: start the backoff over
		}
		l.logger.Warn("notification connection lost, reconnecting", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// listen holds one connection until it fails; connected tells whether it
// got as far as listening.
func (l *Listener) listen(ctx context.Context) (connected bool, err error) {
	conn, err := pgx.Connect(ctx, l.cfg.DSN())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
	}
	l.wakeAll()
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
	for _, ch := range l.subs[channel] {
		select {
		case ch <- payload:
		default:
		}
	}
}

// wakeAll tells every subscriber that notifications may have been missed.
func (l *Listener) wakeAll() {
	for _, ch := range l.channels {
		l.publish(ch, "")
	}
}
