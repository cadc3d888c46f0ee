package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// The fast read path: the one home of the inventory's hand-tuned reads.
//
// A hot read (a managed cluster by id, a page of the list, an organisation's
// page, the change feed: the row types managedClusterRow and feedRow)
// bypasses GORM's reflective scan and database/sql's conversions. GORM still
// builds its statements; they run on the pgx connection beneath database/sql
// (find, and roundTrip for several in one round trip) or, in a transaction,
// through database/sql (scanRows), and each row is scanned into the fields of
// its row type in the order of its SELECT list. What this saved is in
// docs/performance.md. Only a read whose cost was measured to matter goes
// here; every other read keeps GORM's Find, which matches columns to fields
// by name. The rules:
//
//   - A row type's columns are declared once, as pairs of a column's SQL and
//     the field it is scanned into (column, newColumns): the SELECT list
//     (columns.sql, joined once at start) and the scan's destinations
//     (columns.fields) are both built from the list, so adding a column is
//     one line. newColumns panics at package init when a field of the row has
//     no column, or two, or a column scans into no field of it
//     (checkColumns).
//   - A statement selects its row type's list and nothing else: a column
//     count other than the row's is an error (appendScanned), never padded.
//   - TestFastReadsReturnWhatWasWritten (inventory_fastread_test.go) writes
//     rows with a value of its own in every column and reads them back
//     through every fast read, field by field against what was written. It
//     catches what compiles and scans: two columns of one type swapped in a
//     list. A new fast read, or a new column, is added to it.
//   - A change is measured before and after, on one machine:
//     BenchmarkManagedClusterPage (internal/rest, make bench/go) for a page's
//     CPU in process, make bench/reads for the reads at fleet scale and their
//     plans. The figures go to docs/performance.md and the commit body.
//
// internal/rest/inventory_json.go is the answer's half of the path, with a
// field-by-field test of its own.

// column is one column of a fast read: its SQL in the SELECT list and the
// field of a row R it is scanned into.
type column[R any] struct {
	sql  string
	into func(*R) any
}

// columns is a fast read's SELECT list and its scan destinations, declared
// together so the two cannot disagree.
type columns[R any] struct {
	list []column[R]
	// sql is the SELECT list, joined once at start.
	sql string
}

// newColumns is the columns of list, checked against R (checkColumns); it
// panics on a mismatch, so a wrong list fails at package init.
func newColumns[R any](list ...column[R]) columns[R] {
	if err := checkColumns(list); err != nil {
		panic(err)
	}
	exprs := make([]string, len(list))
	for i, c := range list {
		exprs[i] = c.sql
	}
	return columns[R]{list: list, sql: strings.Join(exprs, ", ")}
}

// fields are the destinations of r's columns, in the SELECT list's order.
func (c columns[R]) fields(r *R) []any {
	dest := make([]any, len(c.list))
	for i, col := range c.list {
		dest[i] = col.into(r)
	}
	return dest
}

// within is c as the columns of a row O that holds an R (at), for a read
// that selects more than R's columns.
func within[O, R any](c columns[R], at func(*O) *R) []column[O] {
	out := make([]column[O], len(c.list))
	for i, col := range c.list {
		into := col.into
		out[i] = column[O]{sql: col.sql, into: func(o *O) any { return into(at(o)) }}
	}
	return out
}

// checkColumns checks, by reflection on a zero R, that every field of R
// (and of its structs tagged gorm:"embedded") is the destination of exactly
// one column of list, and that every column has SQL and a destination among
// them.
func checkColumns[R any](list []column[R]) error {
	type field struct {
		typ  reflect.Type
		addr uintptr
	}
	var row R
	name := reflect.TypeOf(row).String()
	dests := map[field]int{} // a destination's column
	for i, c := range list {
		if strings.TrimSpace(c.sql) == "" || c.into == nil {
			return fmt.Errorf("columns of %s: column %d has no SQL or no destination", name, i)
		}
		v := reflect.ValueOf(c.into(&row))
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return fmt.Errorf("columns of %s: column %q scans into %v, not a field's address", name, c.sql, c.into(&row))
		}
		f := field{v.Type().Elem(), v.Pointer()}
		if j, dup := dests[f]; dup {
			return fmt.Errorf("columns of %s: columns %q and %q scan into one field", name, list[j].sql, c.sql)
		}
		dests[f] = i
	}
	var walk func(v reflect.Value, path string) error
	walk = func(v reflect.Value, path string) error {
		for i := range v.NumField() {
			sf, fv := v.Type().Field(i), v.Field(i)
			if sf.Tag.Get("gorm") == "embedded" {
				if err := walk(fv, path+sf.Name+"."); err != nil {
					return err
				}
				continue
			}
			f := field{sf.Type, fv.Addr().Pointer()}
			if _, ok := dests[f]; !ok {
				return fmt.Errorf("columns of %s: field %s%s has no column", name, path, sf.Name)
			}
			delete(dests, f)
		}
		return nil
	}
	if err := walk(reflect.ValueOf(&row).Elem(), ""); err != nil {
		return err
	}
	if len(dests) > 0 {
		stray := len(list)
		for _, i := range dests {
			stray = min(stray, i)
		}
		return fmt.Errorf("columns of %s: column %q scans into no field of the row", name, list[stray].sql)
	}
	return nil
}

// scannedRow is a row type of the fast path: it lists its fields, as
// pointers, in the order of its columns' SELECT list.
type scannedRow interface {
	fields() []any
}

// statement is one statement of a round trip (roundTrip): its SQL and
// arguments, and what reads its rows.
type statement struct {
	sql  string
	args []any
	// generic runs the statement with a generic plan, made once per
	// connection and kept, instead of planning it with its values as every
	// other statement is (plan_cache_mode=force_custom_plan, config.go). Only
	// for a statement whose values cannot change its best plan: the served
	// zones, an organisation's hubs, the paging; never a caller's search.
	// Planning the page of the inventory and its total cost PostgreSQL more
	// than running them (docs/performance.md).
	generic bool
	read    func(pgx.Rows) error
}

// built is the statement GORM builds for finish (query.Find(&rows), say),
// not run, with read for its rows.
func built(query *gorm.DB, finish func(*gorm.DB) *gorm.DB, read func(pgx.Rows) error) (statement, error) {
	tx := finish(query.Session(&gorm.Session{DryRun: true, Logger: logger.Discard}))
	return statement{sql: tx.Statement.SQL.String(), args: tx.Statement.Vars, read: read}, tx.Error
}

// rowScanner is what pgx.Rows and database/sql's Rows share.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// appendScanned appends each row of res to rows, scanned into the fields *T
// lists (it must be a scannedRow), in order. A statement whose rows have
// another number of columns (columns, asked at the first row, when a failed
// statement has none) is refused, not padded: the two are one list
// (columns).
func appendScanned[T any](res rowScanner, rows *[]T, columns func() int) error {
	var row T
	dest := any(&row).(scannedRow).fields() // scanned into again for every row, then copied
	for first := true; res.Next(); first = false {
		if first && columns() != len(dest) {
			return fmt.Errorf("the statement returns %d columns, a %T row scans %d", columns(), row, len(dest))
		}
		if err := res.Scan(dest...); err != nil {
			return err
		}
		*rows = append(*rows, row)
	}
	return res.Err()
}

// readRows appends each row of a round trip's statement to rows, scanned
// into the fields *T lists.
func readRows[T any](rows *[]T) func(pgx.Rows) error {
	return func(res pgx.Rows) error {
		return appendScanned(res, rows, func() int { return len(res.FieldDescriptions()) })
	}
}

// readOne scans the statement's one row into dest.
func readOne(dest ...any) func(pgx.Rows) error {
	return func(res pgx.Rows) error {
		if !res.Next() {
			return errors.Join(errors.New("the statement returned no row"), res.Err())
		}
		return res.Scan(dest...)
	}
}

// errNotOnPool is roundTrip's answer on a connection it cannot batch on (a
// transaction's).
var errNotOnPool = errors.New("roundTrip: not on the connection pool")

// Switches of a connection's plan cache mode around generic statements. RESET
// returns to the mode the connection string set; a failed round trip rolls
// the SET back with the rest of its implicit transaction.
const (
	setGenericPlans = "SET plan_cache_mode = force_generic_plan"
	resetPlans      = "RESET plan_cache_mode"
)

// roundTrip runs stmts in order, on one connection of db's pool, in one round
// trip to PostgreSQL (a pgx batch, one implicit transaction, each statement
// with its own snapshot as in autocommit) and reads their rows. Each
// statement is logged as GORM logs its own. It answers errNotOnPool when db
// is in a transaction.
func roundTrip(db *gorm.DB, stmts ...statement) error {
	pool, ok := db.Statement.ConnPool.(waitPool)
	if !ok {
		return errNotOnPool
	}
	begin := time.Now()
	conn, ctx, done, err := pool.conn(db.Statement.Context)
	if err == nil {
		err = conn.Raw(func(driverConn any) error {
			c, err := pgxConn(driverConn)
			if err != nil {
				return fmt.Errorf("roundTrip: %w", err)
			}
			err = sendBatch(ctx, c, stmts)
			if err != nil && c.PgConn().TxStatus() != 'I' {
				// Left in a transaction, perhaps with its plan cache mode
				// switched: database/sql closes it rather than reuse it.
				return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
			}
			return err
		})
		if cerr := conn.Close(); err == nil {
			err = cerr
		}
		err = done(err)
	}
	ctx = db.Statement.Context
	observe := statementObserver(db)
	for _, s := range stmts {
		db.Logger.Trace(ctx, begin, func() (string, int64) { return s.logged(db), -1 }, err)
		if observe != nil {
			observe(ObservedStatement{SQL: s.sql, Args: s.args, Generic: s.generic})
		}
	}
	// GORM translates the errors of the statements it runs; these it never sees.
	return translateError(err)
}

// logged is the statement as the log shows it: with its values bound only
// where the logger's ParamsFilter lets them through (debug mode), and a
// generic one as the prepared statement and execution it is, for a reader
// to run as such. Programs that need the statements observe them
// (StatementObserver) rather than read the log.
func (s statement) logged(db *gorm.DB) string {
	sql, args := s.sql, s.args
	if filter, ok := db.Logger.(gorm.ParamsFilter); ok {
		sql, args = filter.ParamsFilter(db.Statement.Context, sql, args...)
	}
	if !s.generic {
		return db.Dialector.Explain(sql, args...)
	}
	return "PREPARE generic AS " + sql + "; " + db.Dialector.Explain(execute("generic", len(s.args)), args...)
}

// execute is the EXECUTE of the prepared statement name with n parameters,
// written as placeholders ($1, $2, ...).
func execute(name string, n int) string {
	params := make([]string, n)
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	if n == 0 {
		return "EXECUTE " + name
	}
	return "EXECUTE " + name + "(" + strings.Join(params, ", ") + ")"
}

// sendBatch queues stmts, with the plan cache mode switched around the
// generic ones, and sends them; pgx's Close reads the results in order, runs
// each statement's read on its rows and returns the first error.
func sendBatch(ctx context.Context, c *pgx.Conn, stmts []statement) error {
	batch, generic := &pgx.Batch{}, false
	switchTo := func(g bool) {
		if g != generic {
			batch.Queue(map[bool]string{true: setGenericPlans, false: resetPlans}[g])
			generic = g
		}
	}
	for _, s := range stmts {
		switchTo(s.generic)
		// Beneath database/sql: the operation's comment is added here (tagging.go).
		batch.Queue(tagged(ctx, s.sql), s.args...).Query(s.read)
	}
	switchTo(false)
	return c.SendBatch(ctx, batch).Close()
}

// find runs query as query.Find into []T would; capacity is the most rows
// expected, for the slice's first allocation. When *T is a scannedRow and
// the query is not in a transaction, it runs the statement GORM built on the
// pgx connection beneath database/sql (roundTrip) and scans each row into
// the row's fields: for a page of the inventory, GORM's reflection and
// database/sql's conversion of every value were a large share of the fleet
// manager's CPU (docs/performance.md).
func find[T any](query *gorm.DB, capacity int) ([]T, error) {
	rows := make([]T, 0, capacity)
	_, isPool := query.Statement.ConnPool.(waitPool)
	_, scanned := any(new(T)).(scannedRow)
	switch {
	case !scanned:
		return rows, query.Find(&rows).Error
	case !isPool:
		return scanRows[T](query, capacity)
	}
	s, err := built(query, func(tx *gorm.DB) *gorm.DB { return tx.Find(&rows) }, readRows(&rows))
	if err == nil {
		err = roundTrip(query, s)
	}
	return rows, err
}

// scanRows runs query (GORM builds, runs and logs it, in a transaction too)
// and scans each row through database/sql into the fields *T lists, in
// order (appendScanned). GORM's own Scan matches
// every column to a field by reflection, a large share of the CPU of a page
// of the change feed (docs/performance.md).
func scanRows[T any](query *gorm.DB, capacity int) ([]T, error) {
	res, err := query.Rows()
	if err != nil {
		return nil, err
	}
	defer res.Close()
	cols, err := res.Columns()
	if err != nil {
		return nil, translateError(err)
	}
	rows := make([]T, 0, capacity)
	if err := appendScanned(res, &rows, func() int { return len(cols) }); err != nil {
		// Read after GORM's call returned: its translation never saw it.
		return nil, translateError(err)
	}
	return rows, nil
}
