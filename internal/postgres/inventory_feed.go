package postgres

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// changePosition orders the change feed: the transaction that last wrote a
// row, then the sequence number the write took. The feed reads only rows
// whose transaction is older than every transaction of the database still
// running (feedBound), so once a position is handed out nothing can commit
// below it: a transaction committing later has an id at or above the bound.
type changePosition struct {
	Xid uint64
	Seq int64
	// LSN is the WAL position of the server that handed the cursor out, read
	// after the snapshot it answered from: a read replica that has not
	// replayed up to it may lack what the reader already saw (replica.go).
	// It takes no part in the order; 0 asks for nothing.
	LSN uint64
}

func (p changePosition) less(q changePosition) bool {
	return p.Xid < q.Xid || (p.Xid == q.Xid && p.Seq < q.Seq)
}

// cursor renders a position as the opaque string clients pass back.
func (p changePosition) cursor() string {
	s := fmt.Sprintf("1.%d.%d", p.Xid, p.Seq)
	if p.LSN != 0 {
		s += fmt.Sprintf(".%d", p.LSN)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// parseCursor reads a cursor; an empty one is the start of the history.
func parseCursor(c string) (changePosition, error) {
	if c == "" {
		return changePosition{}, nil
	}
	bad := fleet.Errorf(fleet.CodeValidation, "the cursor is not a cursor of this feed")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return changePosition{}, bad
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "1" {
		return changePosition{}, bad
	}
	xid, err1 := strconv.ParseUint(parts[1], 10, 64)
	seq, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || seq < 0 {
		return changePosition{}, bad
	}
	p := changePosition{Xid: xid, Seq: seq}
	if len(parts) == 4 {
		if p.LSN, err = strconv.ParseUint(parts[3], 10, 64); err != nil {
			return changePosition{}, bad
		}
	}
	return p, nil
}

// feedBound is the feed's read bound: every transaction of this database
// with an id below it has ended, so a later snapshot sees all its rows. It
// is the oldest transaction id still running in this database (as
// pg_stat_activity shows the service's role its own sessions), or the
// snapshot's xmax when none runs. Transactions of other databases on the
// server do not hold it back. The snapshot is taken before the sessions are
// read, so a transaction missing from them had ended or gets a later id.
//
// On a standby (a read replica) pg_stat_activity shows none of the primary's
// transactions, and the snapshot's xmax is only the newest replayed end: a
// transaction the primary still runs may lie below it. There the bound is
// the snapshot's xmin, the oldest transaction the replayed WAL shows running
// in any database (the standby counts an id it has not seen yet, below a
// replayed one, as running), so nothing can commit below it later either.
func feedBound(db *gorm.DB) (uint64, error) {
	var r boundRow
	if err := db.Raw(feedBoundSQL).Scan(&r).Error; err != nil {
		return 0, err
	}
	return r.bound()
}

// feedBoundSQL reads what feedBound needs: the snapshot's xmax and the ids of
// the database's running transactions, as text.
const feedBoundSQL = `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_snapshot_xmin(snap) ELSE pg_snapshot_xmax(snap) END)::text AS xmax,
	(SELECT string_agg(backend_xid::text, ',') FROM pg_stat_activity
	 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL) AS xids
	FROM pg_current_snapshot() AS snap`

// walPositionSQL reads how far the server's WAL goes: the primary's write
// position, a standby's replay position. Read after a snapshot it is at or
// above every commit the snapshot sees (the service commits synchronously:
// a commit is written before it is visible); read before, at or below.
const walPositionSQL = `SELECT (coalesce(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,
	'0/0') - '0/0'::pg_lsn)::bigint`

// boundRow is feedBoundSQL's row.
type boundRow struct {
	Xmax string
	Xids *string
}

// statement reads the row in a round trip. It has no values: PostgreSQL
// keeps its plan in any plan cache mode, so it may run among generic ones.
func (r *boundRow) statement() statement {
	return statement{sql: feedBoundSQL, generic: true, read: readOne(&r.Xmax, &r.Xids)}
}

func (r boundRow) bound() (uint64, error) {
	xmax, err := strconv.ParseUint(r.Xmax, 10, 64)
	if err != nil {
		return 0, err
	}
	bound := xmax
	if r.Xids == nil {
		return bound, nil
	}
	for _, x := range strings.Split(*r.Xids, ",") {
		x32, err := strconv.ParseUint(x, 10, 32)
		if err != nil {
			return 0, err
		}
		bound = min(bound, widenXid(uint32(x32), xmax))
	}
	return bound, nil
}

// widenXid gives a running transaction's 32-bit id its epoch: running ids
// lie within 2^31 of the snapshot's xmax, on either side.
func widenXid(x uint32, xmax uint64) uint64 {
	diff := int64(int32(x - uint32(xmax)))
	return uint64(int64(xmax) + diff)
}

// feedCursor returns the position every later list read covers: any change
// a list does not show is written by a transaction at or above it. It is
// read before the list, in its own statement.
func (s *InventoryStore) feedCursor(ctx context.Context) (string, error) {
	bound, err := feedBound(s.db.Gorm.WithContext(ctx))
	if err != nil {
		return "", err
	}
	return changePosition{Xid: bound}.cursor(), nil
}

// feedPos is a row's change position as the feed reads it: the columns
// pos_xid (change_xid as text) and pos_seq.
type feedPos struct {
	PosXid string
	PosSeq int64
}

func (p feedPos) position() (changePosition, error) {
	xid, err := strconv.ParseUint(p.PosXid, 10, 64)
	return changePosition{Xid: xid, Seq: p.PosSeq}, err
}

// feedRow is a managed_clusters row as the feed reads it, with its position
// and, for a tombstone, when it went.
type feedRow struct {
	Row    managedClusterRow `gorm:"embedded"`
	GoneAt *time.Time
	Pos    feedPos `gorm:"embedded"`
}

func (r feedRow) position() (changePosition, error) { return r.Pos.position() }

func (r *feedRow) fields() []any { return feedColumns.fields(r) }

// feedSource is a table a change feed reads, and how.
type feedSource struct {
	// table is the table, as inventory_purge_horizon names it.
	table string
	// expired is the reason of CodeCursorExpired: it tells a caller whose
	// cursor the purge passed how to start over.
	expired string
	// scope narrows the rows the Pending check looks at (nil: every row).
	scope func(*gorm.DB) *gorm.DB
	// walk makes the planner walk the feed index (walkFeedIndex).
	walk bool
}

// positioned is a row of a change feed: it has its change position.
type positioned interface {
	position() (changePosition, error)
}

// feedRead is one read of a change feed: its rows, oldest first, the cursor
// after them and whether later changes are held back (fleet.ChangePage).
type feedRead[T positioned] struct {
	rows    []T
	cursor  string
	pending bool
	// full says the page holds as many rows as asked.
	full bool
}

// readFeed reads on db's pool, in one snapshot, the purge horizon of src and
// up to size changes after the cursor below the feed's bound; read selects
// them. On a read replica (a pool other than s's) it answers
// ErrReplicaBehind, reading nothing, when the replica has not replayed up to
// the cursor's WAL position.
func readFeed[T positioned](ctx context.Context, s *core, db *DB, src feedSource, after string, size int,
	read func(tx *gorm.DB, from changePosition, bound uint64, size int) ([]T, error)) (feedRead[T], error) {
	from, err := parseCursor(after)
	if err != nil {
		return feedRead[T]{}, err
	}
	size = min(max(size, 1), s.cfg.MaxPageSize)
	if db != s.db {
		// Read before the snapshot: the snapshot holds at least this much.
		var replayed uint64
		if err := db.Gorm.WithContext(ctx).Raw(walPositionSQL).Row().Scan(&replayed); err != nil {
			// Scan's error is the row's: GORM's translation never saw it.
			return feedRead[T]{}, translateError(err)
		}
		if replayed < from.LSN {
			return feedRead[T]{}, ErrReplicaBehind
		}
	}
	// The bound is read before the snapshot of the rows, so that snapshot
	// sees every row below it.
	bound, err := feedBound(db.Gorm.WithContext(ctx))
	if err != nil {
		return feedRead[T]{}, err
	}
	var page feedRead[T]
	err = db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := checkHorizon(tx, src, from); err != nil {
			return err
		}
		if src.walk {
			if err := walkFeedIndex(tx); err != nil {
				return err
			}
		}
		rows, err := read(tx, from, bound, size)
		if err != nil {
			return err
		}
		page.rows, page.full = rows, len(rows) == size
		// Read after the snapshot: it holds no more than this. Without a
		// read replica no cursor needs it.
		var lsn uint64
		if s.replicated() {
			if err := tx.Raw(walPositionSQL).Row().Scan(&lsn); err != nil {
				return translateError(err)
			}
		}
		if page.cursor, err = nextCursor(rows, from, bound, size, lsn); err != nil || len(rows) > 0 {
			return err
		}
		later := tx.Session(&gorm.Session{NewDB: true}).Table(src.table).Select("1").
			Where("change_xid >= ?::xid8", strconv.FormatUint(bound, 10))
		if src.scope != nil {
			later = src.scope(later)
		}
		return tx.Raw(`SELECT EXISTS (?)`, later).Scan(&page.pending).Error
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return page, err
}

// ListManagedClusterChanges reads, in one snapshot, the purge horizon and
// the changes after the cursor that the caller may see, oldest first.
//
// A fresh read replica serves a page only when it fills it: a full page
// from the replica is the page the primary answered when it was where the
// replica is (every row below the replica's bound is final), and the cursor
// after it moves forward. A short or empty page may say "nothing more" while
// the primary has more, and a long-poll would then wait for a wake-up that
// already came, so those are read on the primary: the followers at the head
// read there as before, the catch-up pages come from the replica.
func (s *InventoryStore) ListManagedClusterChanges(ctx context.Context, caller fleet.Identity, admin bool, after string, size int) (fleet.ChangePage, error) {
	src := feedSource{table: "managed_clusters", walk: admin,
		expired: "the cursor is older than the retention of deleted clusters: " +
			"list GET /managed_clusters again and resume the feed from the cursor that list returns"}
	var got feedRead[feedRow]
	err := s.heavyRead(ctx, readInventoryFeed, func(db *DB) (err error) {
		got, err = readFeed(ctx, s.core, db, src, after, size, func(tx *gorm.DB, from changePosition, bound uint64, size int) ([]feedRow, error) {
			if !admin {
				return s.readOrgChanges(tx, caller.OrgID, from, bound, size)
			}
			return readChanges(s.inServedZones(tx, "h.zone"), from, bound, size)
		})
		if err == nil && db != s.db && !got.full {
			return ErrReplicaShort
		}
		return err
	})
	if err != nil {
		return fleet.ChangePage{}, fmt.Errorf("ListManagedClusterChanges(%s): %w", caller.OrgID, err)
	}
	page := fleet.ChangePage{Items: make([]fleet.ManagedClusterChange, len(got.rows)), Cursor: got.cursor, Pending: got.pending}
	for i, r := range got.rows {
		page.Items[i] = fleet.ManagedClusterChange{Cluster: r.Row.toManagedCluster(), DeletedAt: r.GoneAt}
	}
	return page, nil
}

// walkFeedIndex makes this transaction's planner read the changes in the
// order of the (change_xid, change_seq) index and stop at the page size. It
// estimates the rows after a cursor from the leading column only, so when
// many rows share one transaction id (a full resync, a bulk load) it expects
// one row, hash-joins every later row and sorts them, far slower than the
// index walk (docs/performance.md). Only for callers who see every row: an
// organisation's visibility filter may skip most rows, and walking them one
// by one would cost more than the hash join; its read walks a bounded number
// of changes, then its own hubs and registrations (readOrgChanges).
func walkFeedIndex(tx *gorm.DB) error {
	for _, setting := range []string{"enable_sort", "enable_hashjoin", "enable_mergejoin"} {
		if err := tx.Exec("SET LOCAL " + setting + " = off").Error; err != nil {
			return err
		}
	}
	return nil
}

// checkHorizon refuses a cursor below the highest position the tombstone
// purge of src deleted: the changes between the two may include a lost
// deletion.
func checkHorizon(tx *gorm.DB, src feedSource, from changePosition) error {
	var h []struct {
		Xid string
		Seq int64
	}
	if err := tx.Raw(`SELECT change_xid::text AS xid, change_seq AS seq FROM inventory_purge_horizon WHERE table_name = ?`,
		src.table).Scan(&h).Error; err != nil {
		return err
	}
	if len(h) == 0 {
		return nil
	}
	xid, err := strconv.ParseUint(h[0].Xid, 10, 64)
	if err != nil {
		return err
	}
	if from.less(changePosition{Xid: xid, Seq: h[0].Seq}) {
		return fleet.Errorf(fleet.CodeCursorExpired, "%s", src.expired)
	}
	return nil
}

// feedColumns are the columns the feed reads of a managed_clusters row mc
// and its hub h, each with its field of a feedRow.
var feedColumns = newColumns(append(within(managedClusterColumns, func(r *feedRow) *managedClusterRow { return &r.Row }),
	column[feedRow]{"coalesce(mc.deleted_at, h.deleted_at) AS gone_at", func(r *feedRow) any { return &r.GoneAt }},
	column[feedRow]{"mc.change_xid::text AS pos_xid", func(r *feedRow) any { return &r.Pos.PosXid }},
	column[feedRow]{"mc.change_seq AS pos_seq", func(r *feedRow) any { return &r.Pos.PosSeq }},
)...)

// readChanges reads every caller's changes (an administrator's), scoped by
// the conditions tx carries, walking the (change_xid, change_seq) index.
func readChanges(tx *gorm.DB, from changePosition, bound uint64, size int) ([]feedRow, error) {
	query := tx.Table("managed_clusters AS mc").Select(feedColumns.sql).Joins("JOIN hubs h ON h.id = mc.hub_id")
	return scanRows[feedRow](changesBetween(query, "mc", from, bound, size), size)
}

// orgWalk is how many changes, per row of the page, an organisation's read
// walks in change order before it reads from its own hubs and registrations.
const orgWalk = 20

// readOrgChanges reads the changes an organisation may see: the rows, order
// and page of readChanges filtered by visibleTo. It walks the next
// size*orgWalk changes after the cursor (the end of the walk is read first,
// from the change index alone, so any plan stays within it): a follower near
// the head, or an organisation that sees a fair share of the changes, gets
// its page there. Only when the walk ends short of the page does it read on
// from its end through the organisation's own hubs and registrations
// (orgChangesSQL), at a cost bounded by what the organisation can see rather
// than by everyone's changes after the cursor. A caller of no organisation
// sees nothing.
func (s *InventoryStore) readOrgChanges(tx *gorm.DB, org string, from changePosition, bound uint64, size int) ([]feedRow, error) {
	if org == "" {
		return nil, nil
	}
	var ends []feedPos
	err := changesBetween(tx.Session(&gorm.Session{NewDB: true}).Table("managed_clusters AS c"), "c", from, bound, 1).
		Select("c.change_xid::text AS pos_xid, c.change_seq AS pos_seq").Offset(size*orgWalk - 1).Scan(&ends).Error
	if err != nil {
		return nil, err
	}
	walk := changesBetween(tx.Session(&gorm.Session{NewDB: true}).Table("managed_clusters AS c").Select("c.*"), "c", from, bound, size*orgWalk)
	if len(ends) > 0 {
		walk = walk.Where("(c.change_xid, c.change_seq) <= (?::xid8, ?)", ends[0].PosXid, ends[0].PosSeq)
	}
	query := tx.Session(&gorm.Session{NewDB: true}).Table("(?) AS mc", walk).Select(feedColumns.sql).
		Joins("JOIN hubs h ON h.id = mc.hub_id").Joins("LEFT JOIN registrations r ON r.id = mc.registration_id")
	query = visibleTo(s.inServedZones(query, "h.zone"), org).Order("mc.change_xid, mc.change_seq").Limit(size)
	rows, err := scanRows[feedRow](query, size)
	if err != nil || len(rows) == size || len(ends) == 0 {
		return rows, err
	}
	end, err := ends[0].position()
	if err != nil {
		return nil, err
	}
	more, err := s.readOrgSources(tx, org, end, bound, size-len(rows))
	return append(rows, more...), err
}

// orgChangesSQL reads an organisation's changes from what it can see: the
// first page of each hub it owns (index (hub_id, change_xid, change_seq)) and
// of each of its registrations' clusters on shared hubs (index
// (registration_id, change_xid, change_seq)), then the page of their union.
// The two never overlap: a hub is owned or shared. Like the admin feed it
// keeps tombstones and deleted hubs' rows, and the clusters of deleted
// registrations, whose tombstones the organisation must see. Each lateral
// subquery holds its LIMIT, so the planner cannot turn it into a walk of
// everyone's changes. The union is ordered by the position columns it
// selects (pos_xid is change_xid as text), so that it selects feedColumns
// and nothing else. %[1]s is the position window of the rows c, %[2]s the
// served zones' predicate on h.zone.
var orgChangesSQL = `SELECT * FROM (
	SELECT ` + feedColumns.sql + ` FROM hubs h
	CROSS JOIN LATERAL (SELECT c.* FROM managed_clusters c WHERE c.hub_id = h.id AND %[1]s) AS mc
	WHERE h.owner_org_id = ? AND %[2]s
	UNION ALL
	SELECT ` + feedColumns.sql + ` FROM registrations r
	CROSS JOIN LATERAL (SELECT c.* FROM managed_clusters c WHERE c.registration_id = r.id AND %[1]s) AS mc
	JOIN hubs h ON h.id = mc.hub_id
	WHERE r.org_id = ? AND h.owner_org_id IS NULL AND %[2]s
) AS feed ORDER BY feed.pos_xid::xid8, feed.pos_seq LIMIT ?`

// readOrgSources reads up to size of an organisation's changes after from
// and below bound (orgChangesSQL), at the cost of its hubs and registrations.
func (s *InventoryStore) readOrgSources(tx *gorm.DB, org string, from changePosition, bound uint64, size int) ([]feedRow, error) {
	window := `(c.change_xid, c.change_seq) > (?::xid8, ?) AND c.change_xid < ?::xid8
		ORDER BY c.change_xid, c.change_seq LIMIT ?`
	windowArgs := []any{strconv.FormatUint(from.Xid, 10), from.Seq, strconv.FormatUint(bound, 10), size}
	zones, zoneArgs := s.servedZonesSQL("h.zone")
	args := slices.Concat(windowArgs, []any{org}, zoneArgs, windowArgs, []any{org}, zoneArgs, []any{size})
	return scanRows[feedRow](tx.Raw(fmt.Sprintf(orgChangesSQL, window, zones), args...), size)
}

// changesBetween keeps the rows of the table aliased alias written after
// from and below bound, in change order, up to size.
func changesBetween(q *gorm.DB, alias string, from changePosition, bound uint64, size int) *gorm.DB {
	return q.Where("("+alias+".change_xid, "+alias+".change_seq) > (?::xid8, ?) AND "+alias+".change_xid < ?::xid8",
		strconv.FormatUint(from.Xid, 10), from.Seq, strconv.FormatUint(bound, 10)).
		Order(alias + ".change_xid, " + alias + ".change_seq").Limit(size)
}

// nextCursor is the cursor after rows. A full page resumes after its last
// row; a short one has read every visible change below bound, so it resumes
// at bound and a caller that sees few changes does not fall behind the purge.
// Its WAL position is lsn, the reading server's, or from's when higher.
func nextCursor[T positioned](rows []T, from changePosition, bound uint64, size int, lsn uint64) (string, error) {
	next := from
	for _, r := range rows {
		p, err := r.position()
		if err != nil {
			return "", err
		}
		next = p
	}
	if len(rows) < size && next.less(changePosition{Xid: bound}) {
		next = changePosition{Xid: bound}
	}
	next.LSN = max(from.LSN, lsn)
	return next.cursor(), nil
}
