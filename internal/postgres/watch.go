package postgres

import (
	"context"
	"sync"
)

// RevisionWatch wakes the long-polls of hub agents on whichever replica holds
// them: it follows ChannelHubRevision (the payload is the hub id; an empty
// payload, sent after a reconnect, wakes everyone).
type RevisionWatch struct {
	events <-chan string
	mu     sync.Mutex
	byHub  map[string]map[chan struct{}]struct{}
}

// NewRevisionWatch subscribes to listener; Run dispatches.
func NewRevisionWatch(listener *Listener) *RevisionWatch {
	return &RevisionWatch{events: listener.Subscribe(ChannelHubRevision), byHub: map[string]map[chan struct{}]struct{}{}}
}

// Run dispatches notifications until ctx ends.
func (w *RevisionWatch) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case hubID := <-w.events:
			w.wake(hubID)
		}
	}
}

// WaitRevision returns a channel closed at the hub's next revision change.
func (w *RevisionWatch) WaitRevision(hubID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byHub[hubID] == nil {
		w.byHub[hubID] = map[chan struct{}]struct{}{}
	}
	w.byHub[hubID][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.byHub[hubID][ch]; ok {
			delete(w.byHub[hubID], ch)
			if len(w.byHub[hubID]) == 0 {
				delete(w.byHub, hubID)
			}
		}
	}
}

func (w *RevisionWatch) wake(hubID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, waiters := range w.byHub {
		if hubID != "" && id != hubID {
			continue
		}
		for ch := range waiters {
			close(ch)
		}
		delete(w.byHub, id)
	}
}
