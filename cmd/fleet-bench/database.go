package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchDB is the benchmark's own database, created fresh for the run.
type benchDB struct {
	server dbOptions
	name   string
	conn   *pgx.Conn // to the benchmark database, for the floor and the probes
}

// dsn returns the URL of database name on the server o names.
func (o dbOptions) dsn(name string) string {
	u := url.URL{Scheme: "postgres", User: url.User(o.User), Host: o.Host + ":" + strconv.Itoa(o.Port), Path: "/" + name,
		RawQuery: "sslmode=disable&connect_timeout=10"}
	if o.Password != "" {
		u.User = url.UserPassword(o.User, o.Password)
	}
	return u.String()
}

// openDatabase connects to the existing database name, as kept by an
// earlier run.
func openDatabase(ctx context.Context, server dbOptions, name string) (*benchDB, error) {
	conn, err := pgx.Connect(ctx, server.dsn(name))
	if err != nil {
		return nil, fmt.Errorf("openDatabase(%s): %w", name, err)
	}
	return &benchDB{server: server, name: name, conn: conn}, nil
}

// createDatabase creates fmbench_<random> through the server's postgres
// database and connects to it.
func createDatabase(ctx context.Context, server dbOptions) (*benchDB, error) {
	admin, err := pgx.Connect(ctx, server.dsn("postgres"))
	if err != nil {
		return nil, fmt.Errorf("createDatabase: no PostgreSQL at %s:%d as %s: %w", server.Host, server.Port, server.User, err)
	}
	defer admin.Close(ctx)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "fmbench_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("createDatabase(%s): %w", name, err)
	}
	conn, err := pgx.Connect(ctx, server.dsn(name))
	if err != nil {
		return nil, fmt.Errorf("createDatabase(%s): connect: %w", name, err)
	}
	return &benchDB{server: server, name: name, conn: conn}, nil
}

// drop closes the connection and drops the database, whatever still uses it.
func (db *benchDB) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = db.conn.Close(ctx)
	admin, err := pgx.Connect(ctx, db.server.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("dropDatabase(%s): %w", db.name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropDatabase(%s): %w", db.name, err)
	}
	return nil
}

// serverFacts reads the PostgreSQL version and the settings that bear on
// write speed.
func (db *benchDB) serverFacts(ctx context.Context) (string, error) {
	var version, buffers, syncCommit, walSize, autovacuum string
	err := db.conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('shared_buffers'),
	current_setting('synchronous_commit'), current_setting('max_wal_size'), current_setting('autovacuum')`).
		Scan(&version, &buffers, &syncCommit, &walSize, &autovacuum)
	if err != nil {
		return "", fmt.Errorf("serverFacts: %w", err)
	}
	return fmt.Sprintf("PostgreSQL %s (shared_buffers %s, synchronous_commit %s, max_wal_size %s, autovacuum %s)",
		version, buffers, syncCommit, walSize, autovacuum), nil
}

// walLSN returns the server's current WAL position in bytes. The WAL is the
// whole server's, so other databases' writes count too.
func (db *benchDB) walLSN(ctx context.Context) (int64, error) {
	var lsn int64
	err := db.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&lsn)
	return lsn, err
}

// checkpoint flushes dirty buffers, so that no phase pays for the writes of
// the one before it.
func (db *benchDB) checkpoint(ctx context.Context) error {
	_, err := db.conn.Exec(ctx, "CHECKPOINT")
	return err
}

// backendPIDs lists the server processes serving the benchmark database,
// except the benchmark's own probe connection and the backends of exclude.
func backendPIDs(ctx context.Context, conn *pgx.Conn, dbName string, exclude []int) ([]int, error) {
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()
		AND pid <> ALL($2::int[])`, dbName, append([]int{}, exclude...))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
