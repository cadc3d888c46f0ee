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

// Notification channels. Every write that creates work asks for a wake-up,
// which the store sends after the write committed, coalesced (wake.go), so
// a wake-up is never seen before the row it announces.
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

// core is what every aggregate's store shares: the connection, the
// transactions, the waker, replica routing, sealing and the configuration.
// It holds no SQL of any kind.
type core struct {
	db      *DB
	keyring *secrets.Keyring
	clock   fleet.Clock
	cfg     StoreConfig
	authz   fleet.Authorizer
	waker   *waker
	// replica routes the heavy reads (a readreplica.Replica); nil: the
	// primary serves them.
	replica ReadRouter
}

// ReadRouter routes the store's heavy reads (the inventory's list and
// search, the change feed's pages, the user-facing metrics' reads) between
// the primary and a read replica: readreplica.Replica is the one
// (docs/database-read-replicas.md).
type ReadRouter interface {
	// Read runs fn, the heavy read of kind (a bounded label: inventory_list,
	// inventory_feed, user_metrics), on the pool that serves it: a fresh
	// replica's, else the primary's. On a replica's pool fn may
	// answer ErrReplicaShort or ErrReplicaBehind: its answer does not stand
	// for the primary's, and Read runs fn again on the primary.
	Read(ctx context.Context, kind string, fn func(db *DB) error) error
	// Serving reports whether a replica is configured: only then may Read
	// run fn on a pool other than the primary's, and do cursors carry the
	// WAL position of the server that answered.
	Serving() bool
}

// Read kinds: what the store tells its ReadRouter each heavy read is.
const (
	readInventoryList = "inventory_list"
	readInventoryFeed = "inventory_feed"
	readUserMetrics   = "user_metrics"
)

// Answers of a heavy read on a replica's pool whose result cannot stand for
// the primary's: the ReadRouter runs the read again on the primary.
var (
	// ErrReplicaShort is a change feed page the replica could not fill.
	ErrReplicaShort = errors.New("the replica's answer is short of a page")
	// ErrReplicaBehind says the replica has not replayed up to the WAL
	// position of the cursor it was asked to resume from.
	ErrReplicaBehind = errors.New("the replica is behind the cursor")
)

// RegistrationStore keeps registrations: create (one or a batch), read,
// list, update and deregister.
type RegistrationStore struct{ *core }

// HubStore keeps hubs and what their agents report and are sent: the hub
// rows, hub_mgr's liveness, heartbeats, registration statuses, desired sets
// and the SyncSet material.
type HubStore struct {
	*core
	regs  *RegistrationStore
	pools *PoolStore
}

// InventoryStore keeps what the agents report the hubs hold: managed
// clusters, their change feed, the agents' resources and counted labels.
type InventoryStore struct {
	*core
	hubs *HubStore
}

// PolicyStore keeps configuration policies, their delivery and compliance.
type PolicyStore struct {
	*core
	inventory *InventoryStore
}

// BlueprintStore keeps blueprints and their versions.
type BlueprintStore struct{ *core }

// PoolStore keeps capacity pools, their clusters, reservations, the orgs'
// limits and pool_mgr's queue.
type PoolStore struct {
	*core
	blueprints *BlueprintStore
	regs       *RegistrationStore
}

// DNSStore keeps DNS zones, services and records, and dns_mgr's queue.
type DNSStore struct{ *core }

// MetricsStore answers the user-facing metrics' reads.
type MetricsStore struct {
	*core
	inventory *InventoryStore
}

// Store is every aggregate's store over one core: a caller names the one it
// needs (rest.Services takes one per slot); the methods of each are
// promoted, so a test may still ask the Store.
type Store struct {
	*core
	*RegistrationStore
	*HubStore
	*InventoryStore
	*PolicyStore
	*BlueprintStore
	*PoolStore
	*DNSStore
	*MetricsStore
}

// NewStore returns the store; keyring encrypts the secret columns, authz
// decides what the store decides inside its transactions (a registration's
// pre-flight rules and quota).
func NewStore(db *DB, keyring *secrets.Keyring, clock fleet.Clock, cfg StoreConfig, authz fleet.Authorizer) *Store {
	return newStore(&core{db: db, keyring: keyring, clock: clock, cfg: cfg, authz: authz, waker: newWaker(db.Gorm, cfg.WakeInterval)})
}

// newStore builds the aggregates' stores over c; a store that reads another
// aggregate's rows holds that aggregate's store, so the dependency shows.
func newStore(c *core) *Store {
	regs := &RegistrationStore{c}
	blueprints := &BlueprintStore{c}
	pools := &PoolStore{core: c, blueprints: blueprints, regs: regs}
	hubs := &HubStore{core: c, regs: regs, pools: pools}
	inventory := &InventoryStore{core: c, hubs: hubs}
	return &Store{core: c, RegistrationStore: regs, HubStore: hubs, InventoryStore: inventory,
		PolicyStore: &PolicyStore{core: c, inventory: inventory}, BlueprintStore: blueprints, PoolStore: pools,
		DNSStore: &DNSStore{c}, MetricsStore: &MetricsStore{core: c, inventory: inventory}}
}

// WithReplica returns the store with its heavy reads (the inventory's list
// and search, the change feed's pages, the user-facing metrics' reads)
// routed through r. A nil r leaves every read on the primary.
func (s *Store) WithReplica(r ReadRouter) *Store {
	c := *s.core
	c.replica = r
	return newStore(&c)
}

// replicated reports whether a read replica is configured: only then do
// cursors need the WAL position of the server that answered.
func (s *core) replicated() bool { return s.replica != nil && s.replica.Serving() }

// heavyRead runs fn on the pool that serves a heavy read of kind: the
// replica's while it is fresh, else the primary's (ReadRouter.Read).
func (s *core) heavyRead(ctx context.Context, kind string, fn func(db *DB) error) error {
	if s.replica == nil {
		return fn(s.db)
	}
	return s.replica.Read(ctx, kind, fn)
}

// transact runs fn in a transaction: the service method is the boundary.
// The wake-ups fn asks for (wakeAfterCommit) go to the waker once the
// transaction committed, and are dropped when it rolled back.
func (s *core) transact(ctx context.Context, fn func(tx *gorm.DB) error) error {
	wakes := &pendingWakes{}
	if err := s.db.Gorm.WithContext(context.WithValue(ctx, pendingWakesKey{}, wakes)).Transaction(fn); err != nil {
		return err
	}
	for _, k := range wakes.keys {
		s.waker.announce(k.channel, k.payload)
	}
	return nil
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
func (s *core) pageBounds(q fleet.ListQuery) (page, size int, err error) {
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
func (s *core) seal(plaintext []byte, table, column, id string) (secrets.Sealed, error) {
	sealed, err := s.keyring.Seal(plaintext, aad(table, column, id))
	if err != nil {
		return secrets.Sealed{}, fmt.Errorf("seal(%s.%s): %w", table, column, err)
	}
	return sealed, nil
}

// aad binds a sealed value to its table, column and row.
func aad(table, column, id string) string { return table + "." + column + ":" + id }
