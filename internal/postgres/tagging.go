package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Statement tagging: every statement the service sends starts with a comment
// naming the operation that caused it (fleet.OperationFromContext), such as
// `/* op=listManagedClusters */ SELECT ...`, and every connection carries the
// component in application_name (Config.ApplicationName). pg_stat_activity
// then says, for each session, which component it is and which operation its
// current (or last) statement serves; the server's log shows the comment with
// the statement (log_statement, log_min_duration_statement).
//
// The comment is added beneath GORM, in the driver's connection (taggedConn),
// so every statement of database/sql is tagged in one place, in a
// transaction too, whoever built it; the pgx batches of the fast read path
// (find.go, sendBatch) add it themselves, since they bypass database/sql.
//
// What it costs: a statement's text differs per operation, so pgx's
// per-connection statement cache and the server's prepared statements hold
// one entry per (statement, operation) pair rather than per statement.
// pg_stat_statements identifies a statement by its parse tree, which has no
// comments, so its queryid is the same for every operation; the text it keeps
// is that of the first call it saw, so one operation's comment stands for all
// of them there.

// maxOperation bounds an operation name in a comment.
const maxOperation = 64

// operationComment is the leading comment naming the operation of ctx, or ""
// when ctx carries none. The name is reduced to [A-Za-z0-9_./-], so no name
// can end the comment or add to the statement.
func operationComment(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	name := sanitizeOperation(fleet.OperationFromContext(ctx))
	if name == "" {
		return ""
	}
	return "/* op=" + name + " */ "
}

// sanitizeOperation replaces every byte outside [A-Za-z0-9_./-] with '_' and
// cuts the name at maxOperation bytes.
func sanitizeOperation(name string) string {
	if len(name) > maxOperation {
		name = name[:maxOperation]
	}
	var b []byte // a copy only when a byte must change: names are clean
	for i := 0; i < len(name); i++ {
		if !operationByte(name[i]) {
			if b == nil {
				b = []byte(name)
			}
			b[i] = '_'
		}
	}
	if b == nil {
		return name
	}
	return string(b)
}

// operationByte reports whether c may stay in an operation's name.
func operationByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '/', c == '-':
		return true
	}
	return false
}

// tagged is query with the comment of ctx's operation before it.
func tagged(ctx context.Context, query string) string {
	if c := operationComment(ctx); c != "" {
		return c + query
	}
	return query
}

// openPool opens the database/sql pool on the pgx driver, with every
// connection a taggedConn.
func openPool(ctx context.Context, cfg Config) (*sql.DB, error) {
	conf, err := pgx.ParseConfig(cfg.DSN())
	if err != nil {
		return nil, fmt.Errorf("openPool(%s): %w", cfg.Name, err)
	}
	passwords, err := cfg.passwords(ctx)
	if err != nil {
		return nil, fmt.Errorf("openPool(%s): %w", cfg.Name, err)
	}
	var opts []stdlib.OptionOpenDB
	if passwords != nil {
		opts = append(opts, stdlib.OptionBeforeConnect(beforeConnect(passwords)))
	}
	return sql.OpenDB(taggingConnector{stdlib.GetConnector(*conf, opts...)}), nil
}

// taggingConnector is pgx's connector whose connections tag their statements.
type taggingConnector struct{ driver.Connector }

// Connect opens a pgx connection and wraps it.
func (c taggingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := conn.(*stdlib.Conn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("taggingConnector: the driver's connection is a %T, not pgx's", conn)
	}
	return &taggedConn{pc}, nil
}

// taggedConn is a pgx connection of database/sql that puts the operation's
// comment before every statement it runs or prepares. Embedding keeps every
// optional interface of pgx's connection (session reset, validity, named
// value checks, transactions), which database/sql finds by assertion.
type taggedConn struct{ *stdlib.Conn }

// ExecContext runs query tagged.
func (c *taggedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, tagged(ctx, query), args)
}

// QueryContext runs query tagged; database/sql's QueryRowContext comes here too.
func (c *taggedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, tagged(ctx, query), args)
}

// PrepareContext prepares query tagged.
func (c *taggedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, tagged(ctx, query))
}

// Prepare prepares query, untagged: it has no context.
func (c *taggedConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(context.Background(), query)
}

// IsValid implements driver.Validator: database/sql asks it before it puts a
// connection back in the pool. pgx closes a connection whose statement its
// context cut (the wait bound, a request's deadline), and a closed one must
// not be pooled, where it would hold a slot of --db-max-open-conns until the
// next call found it closed.
func (c *taggedConn) IsValid() bool { return !c.Conn.Conn().IsClosed() }

// pgxConn is the pgx connection beneath a connection of the pool.
func pgxConn(driverConn any) (*pgx.Conn, error) {
	switch c := driverConn.(type) {
	case *taggedConn:
		return c.Conn.Conn(), nil
	case *stdlib.Conn:
		return c.Conn(), nil
	}
	return nil, fmt.Errorf("the driver's connection is a %T, not pgx's", driverConn)
}
