package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Retry delays: exponential from backoffMin, capped at backoffMax.
const (
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
)

// backoff spaces the retries of one failing exchange: each delay doubles up
// to the cap, and is drawn from its upper half so that agents restarted
// together do not retry together.
type backoff struct {
	min, max time.Duration
	attempt  int
}

func newBackoff() *backoff { return &backoff{min: backoffMin, max: backoffMax} }

// next returns the delay before the next attempt.
func (b *backoff) next() time.Duration {
	d := b.min << min(b.attempt, 30)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.attempt++
	return d/2 + rand.N(d/2+1)
}

// after returns the delay before retrying an exchange that failed with err:
// the next delay, or longer when the fleet manager asked for it with
// Retry-After, never longer than the cap.
func (b *backoff) after(err error) time.Duration {
	d := b.next()
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > d {
		d = min(se.RetryAfter, b.max)
	}
	return d
}

// reset starts again from the shortest delay, after a success.
func (b *backoff) reset() { b.attempt = 0 }

// sleep waits d, or less when ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
