package reconcile

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// wokenSet holds the objects named by wake-ups and not claimed yet, each
// with the passes left to try: an object another pass holds (of this
// replica's resync, or another replica's) is tried again until that pass
// released it, or the wake-up would be lost to the holder's older reading.
// pool_mgr keeps its pools in one, dns_mgr its zones.
type wokenSet struct {
	mu    sync.Mutex
	woken map[string]wokenEntry
	seq   uint64
}

// wokenEntry is a woken object's tries left and its latest wake-up's
// number: a wake-up that comes while a pass claims the object is kept for
// the next one.
type wokenEntry struct {
	left int
	seq  uint64
}

// wokenRetries and wokenRetryDelay bound how long a woken object another
// pass holds is tried again: a pass holds one only while it decides and
// applies, far less than the bound.
const (
	wokenRetries    = 20
	wokenRetryDelay = 100 * time.Millisecond
)

func newWokenSet() *wokenSet { return &wokenSet{woken: map[string]wokenEntry{}} }

// forward records the ids wake carries and kicks the loop on each, until
// ctx ends; "" (the listener's poll while it is down) only kicks.
func (w *wokenSet) forward(ctx context.Context, wake <-chan string, kick chan<- string) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-wake:
			if id != "" {
				w.mu.Lock()
				w.seq++
				w.woken[id] = wokenEntry{left: wokenRetries, seq: w.seq}
				w.mu.Unlock()
			}
			select {
			case kick <- id:
			default:
			}
		}
	}
}

// take returns the woken ids not claimed yet, with the number of each one's
// latest wake-up.
func (w *wokenSet) take() map[string]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]uint64, len(w.woken))
	for id, e := range w.woken {
		out[id] = e.seq
	}
	return out
}

// sorted returns taken's ids in order, for a claim's statement.
func sorted(taken map[string]uint64) []string { return slices.Sorted(maps.Keys(taken)) }

// settle forgets the taken ids that were claimed and counts down the
// others, keeping those woken again since taken; it reports whether any is
// left to try.
func (w *wokenSet) settle(taken map[string]uint64, claimed map[string]bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, seq := range taken {
		e, ok := w.woken[id]
		switch {
		case !ok || e.seq != seq:
		case claimed[id] || e.left <= 1:
			delete(w.woken, id)
		default:
			w.woken[id] = wokenEntry{left: e.left - 1, seq: seq}
		}
	}
	return len(w.woken) > 0
}
