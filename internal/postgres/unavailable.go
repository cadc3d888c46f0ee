package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	gormpg "gorm.io/driver/postgres"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// dialector is GORM's PostgreSQL dialector with the service's error
// translation: GORM passes every error of a statement, a transaction's begin
// and commit through Translate (gorm.Config.TranslateError).
type dialector struct{ *gormpg.Dialector }

// Translate implements gorm.ErrorTranslator.
func (d dialector) Translate(err error) error { return translateError(err) }

// Messages of the translated errors: they name no value, since the cause
// (kept as the error's Err, logged, never answered) may quote one.
const (
	unavailableMessage = "the database is unavailable; retry later"
	badTextMessage     = "a text value holds a character the database cannot store (NUL, or one outside UTF-8)"
)

// translateError turns the errors that say the database is out of reach into
// fleet.CodeUnavailable, and text PostgreSQL cannot store into
// fleet.CodeValidation, keeping err as the cause. Anything else, a unique
// violation among them, is returned as it is: the store reads those by code.
func translateError(err error) error {
	if err == nil {
		return nil
	}
	var fe *fleet.Error
	if errors.As(err, &fe) {
		return err
	}
	switch {
	case unavailable(err):
		return &fleet.Error{Code: fleet.CodeUnavailable, Message: unavailableMessage, Err: err}
	case sqlState(err) == "22021" || sqlState(err) == "22P05":
		// character_not_in_repertoire, untranslatable_character.
		return &fleet.Error{Code: fleet.CodeValidation, Message: badTextMessage, Err: err}
	}
	return err
}

// unavailable reports whether err says that the database could not be reached
// or did not answer in time, rather than that the statement was wrong: a lost
// or refused connection, a server shutting down or starting, a statement,
// lock or idle-transaction timeout, or the caller's deadline. Such a failure
// is unavailability (answered 503, retried when the database is back), not a
// defect.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	if code := sqlState(err); code != "" {
		return unavailableState(code)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return pgconn.Timeout(err)
}

// unavailableState tells the SQLSTATEs of unavailability.
func unavailableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	case "57014": // query_canceled: statement_timeout, or the deadline's cancel request
		return true
	case "55P03": // lock_not_available: lock_timeout
		return true
	case "25P03": // idle_in_transaction_session_timeout
		return true
	case "53300": // too_many_connections
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception
}

// sqlState returns the SQLSTATE of the PostgreSQL error in err's chain, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
