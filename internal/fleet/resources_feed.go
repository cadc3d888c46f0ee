package fleet

import (
	"context"
	"time"
)

// ResourceChange is one entry of a kind's change feed: the object as it is
// now, or its tombstone.
type ResourceChange struct {
	Resource Resource
	// DeletedAt is set when the object is gone from its hub (or its hub from
	// the fleet); the row is a tombstone, kept for the tombstone retention.
	DeletedAt *time.Time
}

// ResourceChangePage is one page of a kind's change feed and the cursor to
// resume from; Cursor and Pending are as in ChangePage.
type ResourceChangePage struct {
	Items   []ResourceChange
	Cursor  string
	Pending bool
}

// ResourceChangeFeed follows one synced kind without re-reading it: the
// change feed of the resources table, as ChangeFeed is that of the clusters.
type ResourceChangeFeed interface {
	// ResourceCursor returns the feed's current cursor: a list read after
	// it sees every change up to it, so a client resumes the feed from it
	// after a list.
	ResourceCursor(ctx context.Context) (string, error)
	// ListResourceChanges returns up to size changes of kind after the
	// cursor, oldest first, scoped as ListResources (and to hubID when it
	// is set). An empty after starts from the beginning of the retained
	// history. Errors: CodeValidation (a malformed cursor),
	// CodeCursorExpired (a cursor older than the tombstone retention).
	ListResourceChanges(ctx context.Context, kind ResourceKind, hubID, after string, size int) (ResourceChangePage, error)
}
