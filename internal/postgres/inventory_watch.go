package postgres

import (
	"context"
	"sync"
)

// ChannelInventory is notified by every inventory ingest that wrote a row,
// of managed_clusters or of resources, and by a change of a hub's owner,
// which changes who sees its clusters; the payload is the hub id. It wakes
// the long-polls of both change feeds, which re-read with their own scope,
// and the policy resolver.
const ChannelInventory = "fleet_inventory"

// InventoryWatch wakes the change feed's long-polls on whichever replica
// holds them. Every notification (and the empty one after a reconnect)
// wakes every waiter: a waiter re-reads the feed with its own scope.
type InventoryWatch struct {
	events  <-chan string
	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

// NewInventoryWatch subscribes to listener, which must listen on
// ChannelInventory; Run dispatches.
func NewInventoryWatch(listener *Listener) *InventoryWatch {
	return &InventoryWatch{events: listener.Subscribe(ChannelInventory), waiters: map[chan struct{}]struct{}{}}
}

// Run dispatches notifications until ctx ends.
func (w *InventoryWatch) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.events:
			w.wake()
		}
	}
}

// WaitInventory returns a channel closed at the next inventory change.
func (w *InventoryWatch) WaitInventory() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiters[ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.waiters, ch)
	}
}

func (w *InventoryWatch) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters {
		close(ch)
	}
	clear(w.waiters)
}
