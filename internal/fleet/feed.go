package fleet

import (
	"context"
	"time"
)

// ManagedClusterChange is one entry of the change feed: the cluster as it is
// now, or its tombstone.
type ManagedClusterChange struct {
	Cluster ManagedCluster
	// DeletedAt is set when the cluster is gone from its hub (or its hub from
	// the fleet); the row is a tombstone, kept for the tombstone retention.
	DeletedAt *time.Time
}

// ChangePage is one page of the change feed and the cursor to resume from.
type ChangePage struct {
	Items []ManagedClusterChange
	// Cursor is opaque: pass it back as `after`. It moves past every change
	// the page holds, and, when the page is not full, past every change the
	// caller may not see.
	Cursor string
	// Pending is true when changes after the cursor are committed but not
	// yet readable, because an older transaction is still running: a long-poll
	// looks again shortly instead of waiting for the next notification.
	Pending bool
}

// ChangeFeed follows the inventory without re-reading it.
type ChangeFeed interface {
	// ListManagedClusterChanges returns up to size changes after the cursor,
	// oldest first, scoped as ListManagedClusters. An empty after starts
	// from the beginning of the retained history. Errors: CodeValidation (a
	// malformed cursor), CodeCursorExpired (a cursor older than the tombstone
	// retention).
	ListManagedClusterChanges(ctx context.Context, caller Identity, admin bool, after string, size int) (ChangePage, error)
}

// InventoryWaiter wakes the change feed's long-polls when the inventory moves.
type InventoryWaiter interface {
	// WaitInventory returns a channel closed at the next committed inventory
	// change (or a reconnect that may have missed one), and a func that stops
	// waiting.
	WaitInventory() (<-chan struct{}, func())
}
