package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// wakePayload is the payload of the waker's notifications. Their subscribers
// (the reconcilers, through reconcile.Subscribe) read no payload: a wake-up
// is level-triggered, the woken pass reads the database.
const wakePayload = "wake"

// wakeTimeout bounds one notification: a database that does not answer
// leaves the wake-up to the reconcilers' resync.
const wakeTimeout = 10 * time.Second

// waker sends the store's wake-ups after the writes they announce have
// committed, coalesced: at most one NOTIFY per channel every interval, which
// announces every write committed before it was sent. A NOTIFY inside each
// write's transaction would make every such commit take PostgreSQL's
// cluster-wide notification queue lock in turn, so writes that each notify
// commit one at a time.
//
// A write whose process ends between its commit and the NOTIFY is not
// announced, and is not lost: it is due at once (next_attempt_at = now()),
// and every reconciler passes over due rows at least every
// --reconcile-resync-interval, woken or not (reconcile.loop, and the
// worker's NextDue after each pass), so it is reconciled by the next resync
// of any replica at the latest.
//
// It is every channel's: those whose subscribers read no payload
// (ChannelRegistrations, ChannelHubs, ChannelInventory), where one
// notification stands for many writes, and those coalesced per payload
// (payloadChannels): a hub's long-poll woken re-reads its hub's revision,
// and one that is not (its process ended between the commit and the
// NOTIFY) reads it at the end of its wait; a pool or zone not announced is
// due, and its reconciler's resync finds it.
type waker struct {
	db       *gorm.DB
	interval time.Duration

	mu       sync.Mutex
	channels map[wakeKey]*wakeState
}

// wakeKey is what one notification carries.
type wakeKey struct{ channel, payload string }

// wakeState is one channel's: whether a send is scheduled and has not begun,
// and when the last one began.
type wakeState struct {
	pending bool
	last    time.Time
}

// newWaker returns a waker that sends on db at most once per interval and
// channel (0: as soon as the previous send began).
func newWaker(db *gorm.DB, interval time.Duration) *waker {
	return &waker{db: db, interval: max(interval, 0), channels: map[wakeKey]*wakeState{}}
}

// wake asks for a notification on channel, after the write it announces has
// committed. It never blocks on the database: the send runs on its own,
// at once when the channel's last send began an interval ago or more, else
// when the interval ends; a wake-up that finds a send scheduled is part of
// it.
func (w *waker) wake(channel string) { w.wakeWith(channel, wakePayload) }

// wakeWith is wake with a payload: the notifications of one channel and
// payload are coalesced, those of different payloads are not.
func (w *waker) wakeWith(channel, payload string) {
	key := wakeKey{channel, payload}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.channels[key]
	if st == nil {
		st = &wakeState{}
		w.channels[key] = st
	}
	if st.pending {
		return
	}
	st.pending = true
	time.AfterFunc(max(0, w.interval-time.Since(st.last)), func() { w.send(key) })
}

// send notifies on channel. The channel stops being pending before the
// NOTIFY: a write that committed before this point is announced by it (its
// commit precedes this NOTIFY's), one that wakes after it schedules the next
// send. A failure is logged by GORM, as every statement's; the writes it
// would have announced are due and found by the resync.
func (w *waker) send(key wakeKey) {
	w.mu.Lock()
	st := w.channels[key]
	st.pending, st.last = false, time.Now()
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	_ = w.db.WithContext(ctx).Exec("SELECT pg_notify(?, ?)", key.channel, key.payload).Error
}

// payloadChannels are the channels whose subscribers read the payload: a
// hub's long-polls (ChannelHubRevision), pool_mgr claiming the pool named
// (ChannelPools) and dns_mgr the zone named (ChannelDNS). Their wake-ups are
// coalesced per payload; every other channel's are coalesced per channel,
// whatever payload the write named.
var payloadChannels = map[string]bool{ChannelHubRevision: true, ChannelPools: true, ChannelDNS: true}

// announce asks for a wake-up on channel by the one rule of every channel:
// after the write committed, coalesced per channel, or per payload where
// the subscribers read it (payloadChannels).
func (w *waker) announce(channel, payload string) {
	if payloadChannels[channel] {
		w.wakeWith(channel, payload)
		return
	}
	w.wake(channel)
}

// pendingWakes are the wake-ups a store transaction asked for, sent by
// core.transact once it committed.
type pendingWakes struct{ keys []wakeKey }

// pendingWakesKey keys a transaction's pendingWakes in its context.
type pendingWakesKey struct{}

// wakeAfterCommit asks for a wake-up on channel once tx commits: a NOTIFY in
// the transaction would make every such commit wait its turn on PostgreSQL's
// cluster-wide notification queue lock (ADR 0016). A transaction rolled back
// sends none. tx must be one core.transact began; any other is an error, so
// that no write's wake-up is silently lost.
func wakeAfterCommit(tx *gorm.DB, channel, payload string) error {
	wakes, ok := tx.Statement.Context.Value(pendingWakesKey{}).(*pendingWakes)
	if !ok {
		return fmt.Errorf("wake-up on %s asked outside a store transaction", channel)
	}
	wakes.keys = append(wakes.keys, wakeKey{channel, payload})
	return nil
}

// wake asks the store's waker for a wake-up on channel: call it after the
// write it announces has committed.
func (s *core) wake(channel string) { s.waker.wake(channel) }

// wakeHub asks the store's waker to wake the long-polls of the hub's agent:
// call it after the write that moved the hub's revision has committed.
func (s *core) wakeHub(hubID string) { s.waker.wakeWith(ChannelHubRevision, hubID) }
