package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// batcher coalesces names (of changed objects) into batches. A name queued
// again before its batch left is sent once. A batch is due when it is full,
// or when its oldest name has waited the delay: so a burst of changes costs
// few requests, and a lone change waits at most the delay.
type batcher struct {
	size  int
	delay time.Duration
	now   func() time.Time

	mu      sync.Mutex
	order   []string             // pending names, oldest first
	pending map[string]time.Time // name to when it was first queued
	wake    chan struct{}        // signalled by add
}

func newBatcher(size int, delay time.Duration, now func() time.Time) *batcher {
	return &batcher{size: size, delay: delay, now: now, pending: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// add queues name, unless it is already pending.
func (b *batcher) add(names ...string) {
	b.mu.Lock()
	for _, name := range names {
		if _, ok := b.pending[name]; !ok {
			b.pending[name] = b.now()
			b.order = append(b.order, name)
		}
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// requeue puts back the names of a batch that could not be sent, ahead of
// the names queued since, and due at once.
func (b *batcher) requeue(names []string) {
	b.mu.Lock()
	var back []string
	for _, name := range names {
		if _, ok := b.pending[name]; !ok {
			back = append(back, name)
		}
		b.pending[name] = time.Time{}
	}
	b.order = append(back, b.order...)
	b.mu.Unlock()
}

// len returns how many names are pending.
func (b *batcher) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.order)
}

// next waits until a batch is due and returns it, oldest names first; it
// returns nil when ctx ends.
func (b *batcher) next(ctx context.Context) []string {
	for {
		batch, wait := b.take()
		if batch != nil {
			return batch
		}
		if !b.wait(ctx, wait) {
			return nil
		}
	}
}

// wait blocks until an add, or d passed (forever when d is 0), or ctx ends;
// it reports whether ctx is still live.
func (b *batcher) wait(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-b.wake:
	case <-timer:
	}
	return true
}

// take returns a due batch, or how long until the pending names are due (0
// when none is pending).
func (b *batcher) take() ([]string, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) == 0 {
		return nil, 0
	}
	if len(b.order) < b.size {
		if wait := b.pending[b.order[0]].Add(b.delay).Sub(b.now()); wait > 0 {
			return nil, wait
		}
	}
	n := min(len(b.order), b.size)
	batch := b.order[:n:n]
	b.order = b.order[n:]
	for _, name := range batch {
		delete(b.pending, name)
	}
	return batch, 0
}

// drain sends the batches of b with send until ctx ends. A batch that fails
// goes back into the queue (coalescing with newer changes) and is retried
// with backoff; what names the batch's contents in the log.
func (b *batcher) drain(ctx context.Context, logger *slog.Logger, what string, send func(context.Context, []string) error) {
	retry := newBackoff()
	for {
		names := b.next(ctx)
		if names == nil {
			return
		}
		if err := send(ctx, names); err != nil && ctx.Err() == nil {
			logger.Warn(what+" not sent, will retry", "error", err, "entries", len(names))
			b.requeue(names)
			if !sleep(ctx, retry.after(err)) {
				return
			}
			continue
		}
		retry.reset()
	}
}
