package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// The wait bound: a request's call to the database (the wait for a pooled
// connection, opening one, and the round trip until the first answer) is cut
// at Config.WaitTimeout when its context asks for it
// (fleet.BoundedDatabaseWait), and fails as Unavailable. A frozen server
// answers neither the statement nor a cancel request, and
// statement_timeout is the server's own, so only the client's deadline can
// end the wait: the call's context is cancelled, pgx stops reading and closes
// the connection, and taggedConn.IsValid keeps it out of the pool.
//
// The bound covers the wait for an answer, not the reading of rows after it,
// nor the work between a transaction's statements: each statement of a
// transaction, and its commit, has its own bound, and the rest runs on the
// request's deadline. A batch of the fast read path (roundTrip) is bounded
// until it has been read whole: its statements read a page each. Long-polls, batch endpoints and reconcilers do not ask
// for it and keep their own deadlines.

// errWaitBound is the cause of a call cut by the wait bound.
var errWaitBound = errors.New("the database did not answer within --db-wait-timeout")

// waitPool is GORM's connection pool: database/sql's, each call bounded.
type waitPool struct {
	db    *sql.DB
	bound time.Duration
}

// wait is the bound of one call. Its context outlives the call when the
// call's result does (rows, a transaction), until release or the end of the
// caller's context; the clock stops when the database answers.
type wait struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	bound  time.Duration
}

// startWait returns the context of one call on ctx and its bound, nil (and ctx)
// when ctx asks for none.
func startWait(ctx context.Context, bound time.Duration) (context.Context, *wait) {
	if bound <= 0 || !fleet.BoundedDatabaseWait(ctx) {
		return ctx, nil
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w := &wait{ctx: wctx, cancel: cancel, bound: bound}
	w.timer = time.AfterFunc(bound, func() { cancel(errWaitBound) })
	return wctx, w
}

// answered stops the clock: the database answered, and what follows runs
// on the caller's deadline.
func (w *wait) answered() {
	if w != nil {
		w.timer.Stop()
	}
}

// rearm starts the clock again for another round trip on the same context
// (a transaction's commit or rollback).
func (w *wait) rearm() {
	if w != nil {
		w.timer.Reset(w.bound)
	}
}

// release ends the call's context.
func (w *wait) release() {
	if w != nil {
		w.timer.Stop()
		w.cancel(nil)
	}
}

// result is err, or the Unavailable error of a call the bound cut: the
// cause says so in the log, where a bare context.Canceled would not.
func (w *wait) result(err error) error {
	if err == nil || w == nil || !errors.Is(context.Cause(w.ctx), errWaitBound) {
		return err
	}
	return &fleet.Error{Code: fleet.CodeUnavailable, Message: unavailableMessage, Err: fmt.Errorf("%w: %w", errWaitBound, err)}
}

// GetDBConn lets gorm.DB.DB find the pool.
func (p waitPool) GetDBConn() (*sql.DB, error) { return p.db, nil }

// PrepareContext implements gorm.ConnPool.
func (p waitPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	ctx, w := startWait(ctx, p.bound)
	defer w.release()
	stmt, err := p.db.PrepareContext(ctx, query)
	return stmt, w.result(err)
}

// ExecContext implements gorm.ConnPool.
func (p waitPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx, w := startWait(ctx, p.bound)
	defer w.release()
	res, err := p.db.ExecContext(ctx, query, args...)
	return res, w.result(err)
}

// QueryContext implements gorm.ConnPool. pgx's driver returns once the first
// row (or the end of the result) has arrived: the answer.
func (p waitPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx, w := startWait(ctx, p.bound)
	rows, err := p.db.QueryContext(ctx, query, args...)
	w.answered()
	if err != nil {
		w.release()
	}
	return rows, w.result(err)
}

// QueryRowContext implements gorm.ConnPool.
func (p waitPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx, w := startWait(ctx, p.bound)
	row := p.db.QueryRowContext(ctx, query, args...)
	w.answered()
	if row.Err() != nil {
		w.release()
	}
	return row
}

// BeginTx implements gorm.ConnPoolBeginner: the transaction's statements and
// its end are bounded one by one.
func (p waitPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	ctx, w := startWait(ctx, p.bound)
	tx, err := p.db.BeginTx(ctx, opts)
	w.answered()
	if err != nil {
		w.release()
		return nil, w.result(err)
	}
	return &waitTx{tx: tx, pool: p, w: w}, nil
}

// conn takes a connection of the pool for a pgx batch (roundTrip), its wait
// bounded; done releases the bound once the batch has been read.
func (p waitPool) conn(ctx context.Context) (c *sql.Conn, callCtx context.Context, done func(error) error, err error) {
	callCtx, w := startWait(ctx, p.bound)
	done = func(err error) error { err = w.result(err); w.release(); return err }
	c, err = p.db.Conn(callCtx)
	if err != nil {
		return nil, nil, nil, done(err)
	}
	return c, callCtx, done, nil
}

// waitTx is a transaction of waitPool.
type waitTx struct {
	tx   *sql.Tx
	pool waitPool
	// w bounds the transaction's begin and end; its context is the
	// transaction's.
	w *wait
}

// GetDBConn lets gorm.DB.DB find the pool.
func (t *waitTx) GetDBConn() (*sql.DB, error) { return t.pool.db, nil }

// PrepareContext implements gorm.ConnPool.
func (t *waitTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	ctx, w := startWait(ctx, t.pool.bound)
	defer w.release()
	stmt, err := t.tx.PrepareContext(ctx, query)
	return stmt, w.result(err)
}

// ExecContext implements gorm.ConnPool.
func (t *waitTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx, w := startWait(ctx, t.pool.bound)
	defer w.release()
	res, err := t.tx.ExecContext(ctx, query, args...)
	return res, w.result(err)
}

// QueryContext implements gorm.ConnPool.
func (t *waitTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx, w := startWait(ctx, t.pool.bound)
	rows, err := t.tx.QueryContext(ctx, query, args...)
	w.answered()
	if err != nil {
		w.release()
	}
	return rows, w.result(err)
}

// QueryRowContext implements gorm.ConnPool.
func (t *waitTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx, w := startWait(ctx, t.pool.bound)
	row := t.tx.QueryRowContext(ctx, query, args...)
	w.answered()
	if row.Err() != nil {
		w.release()
	}
	return row
}

// Commit implements gorm.TxCommitter.
func (t *waitTx) Commit() error {
	t.w.rearm()
	defer t.w.release()
	return t.w.result(t.tx.Commit())
}

// Rollback implements gorm.TxCommitter.
func (t *waitTx) Rollback() error {
	t.w.rearm()
	defer t.w.release()
	return t.w.result(t.tx.Rollback())
}
