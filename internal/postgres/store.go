package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// Notification channels. Every write that creates work notifies, in the same
// transaction or after it committed (wake.go), so a wake-up is never seen
// before the row it announces.
const (
	// ChannelRegistrations wakes the reconcilers: a registration has work.
	ChannelRegistrations = "fleet_registrations"
	// ChannelHubs wakes hub_mgr: a hub changed.
	ChannelHubs = "fleet_hubs"
	// ChannelHubRevision carries a hub id whose desired set moved.
	ChannelHubRevision = "fleet_hub_revision"
)

// StoreConfig is the behaviour of the store that is configuration.
type StoreConfig struct {
	// DefaultZone is the zone of registrations that name none; empty requires one.
	DefaultZone string
	// Zones are the zones this deployment serves and where the others are
	// served: creates outside them are refused, reads return none of their rows.
	Zones fleet.Zones
	// MaxPageSize caps the size of a list page.
	MaxPageSize int
	// IdempotencyKeyTTL is how long an Idempotency-Key is remembered.
	IdempotencyKeyTTL time.Duration
	// HeartbeatTimeout is how long an agent hub stays ready after its last heartbeat.
	HeartbeatTimeout time.Duration
	// Policies is where configuration policies go on the hubs.
	Policies fleet.PolicyHubConfig
	// Pools is what capacity pools' clusters are made with.
	Pools fleet.PoolConfig
	// CountedLabels are the label keys whose values the inventory counts per
	// hub, so that a search by one of them answers its total from a counter.
	CountedLabels []string
	// WakeInterval is the shortest time between two wake-ups the store sends
	// on one channel after its writes commit; the writes committed meanwhile
	// share the next (wake.go).
	WakeInterval time.Duration
	// DNSResync is how long after its pass a DNS record that follows a
	// pool cluster is due again, woken or not, so that it follows the
	// cluster's URL and notices the cluster's removal (dns_config.go).
	DNSResync time.Duration
}

// Store implements the domain's services on PostgreSQL.
type Store struct {
	db      *DB
	keyring *secrets.Keyring
	clock   fleet.Clock
	cfg     StoreConfig
	authz   fleet.Authorizer
	waker   *waker
	// replica serves the heavy reads while fresh (replica.go); nil: the primary does.
	replica *Replica
}

// NewStore returns the store; keyring encrypts the secret columns, authz
// decides what the store decides inside its transactions (a registration's
// pre-flight rules and quota).
func NewStore(db *DB, keyring *secrets.Keyring, clock fleet.Clock, cfg StoreConfig, authz fleet.Authorizer) *Store {
	return &Store{db: db, keyring: keyring, clock: clock, cfg: cfg, authz: authz, waker: newWaker(db.Gorm, cfg.WakeInterval)}
}

// WithReplica returns the store with its heavy reads (the inventory's list
// and search, the change feed's pages) routed through r (replica.go).
func (s *Store) WithReplica(r *Replica) *Store {
	c := *s
	c.replica = r
	return &c
}

// replicated reports whether a read replica is configured: only then do
// cursors need the WAL position of the server that answered.
func (s *Store) replicated() bool { return s.replica != nil && s.replica.replica != nil }

// heavyRead runs fn on the pool that serves a heavy read of kind: the
// replica's while it is fresh, else the primary's (Replica.read).
func (s *Store) heavyRead(ctx context.Context, kind string, fn func(db *DB) error) error {
	if s.replica == nil {
		return fn(s.db)
	}
	return s.replica.read(ctx, kind, fn)
}

// transact runs fn in a transaction: the service method is the boundary.
func (s *Store) transact(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.db.Gorm.WithContext(ctx).Transaction(fn)
}

// notify queues a notification that is delivered when tx commits.
func notify(tx *gorm.DB, channel, payload string) error {
	return tx.Exec("SELECT pg_notify(?, ?)", channel, payload).Error
}

// newID returns a time-ordered id, so new rows land at the end of the index.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// pgUniqueViolation is the PostgreSQL error code the store translates.
const pgUniqueViolation = "23505"

// uniqueViolation returns the constraint a unique violation broke, if err is one.
func uniqueViolation(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation {
		return pgErr.ConstraintName, true
	}
	return "", false
}

// notFound is the error of a missing row. It names the kind, not the id
// asked for: the id came from the caller, and a refusal repeats no value.
func notFound(what, id string) error {
	return &fleet.Error{Code: fleet.CodeNotFound, Message: what + " not found", Err: fmt.Errorf("%s %s", what, id)}
}

// checkIfMatch compares an If-Match generation with the current one.
func checkIfMatch(ifMatch *int64, generation int64) error {
	if ifMatch != nil && *ifMatch != generation {
		return fleet.Errorf(fleet.CodePreconditionFailed, "If-Match does not match the current ETag %s", fleet.ETag(generation))
	}
	return nil
}

// pageBounds validates and defaults a page request.
func (s *Store) pageBounds(q fleet.ListQuery) (page, size int, err error) {
	page, size = q.Page, q.Size
	if page == 0 {
		page = 1
	}
	if size == 0 {
		size = min(100, s.cfg.MaxPageSize)
	}
	if page < 1 || page > fleet.MaxPage || size < 1 || size > s.cfg.MaxPageSize {
		return 0, 0, fleet.Errorf(fleet.CodeValidation, "page must be between 1 and %d and size between 1 and %d", fleet.MaxPage, s.cfg.MaxPageSize)
	}
	return page, size, nil
}

// sealJSON encrypts a secret value for the column it is stored in.
func (s *Store) seal(plaintext []byte, table, column, id string) (secrets.Sealed, error) {
	sealed, err := s.keyring.Seal(plaintext, aad(table, column, id))
	if err != nil {
		return secrets.Sealed{}, fmt.Errorf("seal(%s.%s): %w", table, column, err)
	}
	return sealed, nil
}

// aad binds a sealed value to its table, column and row.
func aad(table, column, id string) string { return table + "." + column + ":" + id }
