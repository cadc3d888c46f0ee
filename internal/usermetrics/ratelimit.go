package usermetrics

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// rateLimits keeps one token bucket per organisation; buckets unused for
// idleAfter are dropped, so the map holds the recently active ones only.
type rateLimits struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	limiter *rate.Limiter
	used    time.Time
}

const idleAfter = 10 * time.Minute

func newRateLimits(perSecond float64, burst int) *rateLimits {
	return &rateLimits{rate: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}, swept: time.Now()}
}

// allow spends one token of key's bucket.
func (l *rateLimits) allow(key string) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > idleAfter {
		for k, b := range l.buckets {
			if now.Sub(b.used) > idleAfter {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{limiter: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.used = now
	return b.limiter.AllowN(now, 1)
}
