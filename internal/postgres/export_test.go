package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// NewStatementForTest makes a statement of a round trip, for the external
// tests of roundTrip.
func NewStatementForTest(sql string, args []any, generic bool, read func(pgx.Rows) error) statement {
	return statement{sql: sql, args: args, generic: generic, read: read}
}

// RoundTripForTest is roundTrip on db's pool.
func RoundTripForTest(ctx context.Context, db *DB, stmts ...statement) error {
	return roundTrip(db.Gorm.WithContext(ctx), stmts...)
}

// ExecuteForTest is execute: the EXECUTE of a prepared statement.
func ExecuteForTest(name string, n int) string { return execute(name, n) }

// ReadOneForTest is readOne.
func ReadOneForTest(dest ...any) func(pgx.Rows) error { return readOne(dest...) }

// FindHubForTest is findHub in tx, locking the row when lock is set.
func FindHubForTest(tx *gorm.DB, id string, lock bool) error {
	_, err := findHub(tx, id, lock)
	return err
}

// ClaimStatementsForTest returns the statements a claim of kind runs, one
// per tier, in order, and its NextDue statement.
func ClaimStatementsForTest(kind fleet.WorkKind) (claims []string, nextDue string) {
	for _, tier := range claimTiers {
		claims = append(claims, claimStatement(kind, tier))
	}
	return claims, nextDueStatement(kind)
}

// ConnectForTest is connect: the listener's connection outside the pool.
func ConnectForTest(ctx context.Context, c Config) (*pgx.Conn, error) { return c.connect(ctx) }

// FeedBoundForTest is feedBound on db's pool: the change feed's read bound.
func FeedBoundForTest(ctx context.Context, db *DB) (uint64, error) {
	return feedBound(db.Gorm.WithContext(ctx))
}

// ListManagedClustersOnPrimaryForTest is the list as the primary answers it
// for s, whatever s's read replica would serve.
func ListManagedClustersOnPrimaryForTest(ctx context.Context, s *Store, caller fleet.Identity, admin bool, q fleet.ListQuery) (fleet.ManagedClusterPage, error) {
	return s.listManagedClusters(s.db.Gorm.WithContext(ctx), caller, admin, q)
}

// TextArrayForTest is textArray, the text[] parameter.
func TextArrayForTest(values []string) any { return textArray(values) }

// TransactForTest runs fn in a store transaction (core.transact); wake asks
// for a wake-up once it commits (wakeAfterCommit).
func TransactForTest(ctx context.Context, s *Store, fn func(wake func(channel, payload string) error) error) error {
	return s.transact(ctx, func(tx *gorm.DB) error {
		return fn(func(channel, payload string) error { return wakeAfterCommit(tx, channel, payload) })
	})
}

// WakeAfterCommitForTest is wakeAfterCommit on tx.
func WakeAfterCommitForTest(tx *gorm.DB, channel, payload string) error {
	return wakeAfterCommit(tx, channel, payload)
}

// WakeKeysForTest returns every channel and payload the store's waker was
// asked to send, as "channel/payload", sorted.
func WakeKeysForTest(s *Store) []string {
	s.waker.mu.Lock()
	defer s.waker.mu.Unlock()
	var keys []string
	for k := range s.waker.channels {
		keys = append(keys, k.channel+"/"+k.payload)
	}
	slices.Sort(keys)
	return keys
}
