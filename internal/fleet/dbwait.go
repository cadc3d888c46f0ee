package fleet

import "context"

// A request whose client waits for its answer bounds its waits on the
// database shorter than its own deadline: the database adapter cuts a wait for
// a connection or for a statement's answer at its --db-wait-timeout and
// answers Unavailable, so that a database that stops answering is told to the
// client while it still waits, not after it gave up and retried. The API marks
// its ordinary operations; the long-polls and batch endpoints, and the
// reconcilers, keep their own longer deadlines.

type boundedDatabaseWaitKey struct{}

// NewContextWithBoundedDatabaseWait returns a copy of ctx whose database
// waits the adapter bounds.
func NewContextWithBoundedDatabaseWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, boundedDatabaseWaitKey{}, true)
}

// BoundedDatabaseWait reports whether ctx asks for bounded database waits.
func BoundedDatabaseWait(ctx context.Context) bool {
	bounded, _ := ctx.Value(boundedDatabaseWaitKey{}).(bool)
	return bounded
}
