package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// gormLogger sends GORM's messages to slog: every statement at info level when
// debug is on, slow statements as warnings, failed ones as errors, except
// the refusals a caller caused (a taken name), at debug level without the
// statement. Statements
// are logged with their parameters bound only in debug mode, which is for
// development databases; otherwise only the parameterised SQL is logged.
type gormLogger struct {
	logger *slog.Logger
	debug  bool
	slow   time.Duration
}

func newGormLogger(logger *slog.Logger, debug bool, slow time.Duration) gormlogger.Interface {
	return &gormLogger{logger: logger.With("component", "postgres"), debug: debug, slow: slow}
}

func (l *gormLogger) LogMode(gormlogger.LogLevel) gormlogger.Interface { return l }

func (l *gormLogger) Info(ctx context.Context, msg string, args ...any) {
	l.logger.InfoContext(ctx, fmt.Sprintf(msg, args...))
}

func (l *gormLogger) Warn(ctx context.Context, msg string, args ...any) {
	l.logger.WarnContext(ctx, fmt.Sprintf(msg, args...))
}

func (l *gormLogger) Error(ctx context.Context, msg string, args ...any) {
	l.logger.ErrorContext(ctx, fmt.Sprintf(msg, args...))
}

// ParamsFilter keeps bound values out of the SQL GORM renders unless debug is on,
// so secrets in parameters never reach the log in production.
func (l *gormLogger) ParamsFilter(_ context.Context, sql string, params ...any) (string, []any) {
	if l.debug {
		return sql, params
	}
	return sql, nil
}

func (l *gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	elapsed := time.Since(begin)
	switch {
	case err != nil && callerRefusal(err):
		// The caller's conflict or bad value, answered 4xx: not a failure of
		// the service. The statement stays out of the line, as its values
		// (bound in debug mode, or written into the SQL) are the caller's.
		var pgErr *pgconn.PgError
		errors.As(err, &pgErr)
		l.logger.DebugContext(ctx, "sql refused", "sqlstate", sqlState(err), "constraint", constraintOf(pgErr), "elapsed", elapsed)
	case err != nil && !errors.Is(err, gorm.ErrRecordNotFound) && !errors.Is(err, context.Canceled):
		sql, rows := fc()
		l.logger.ErrorContext(ctx, "sql failed", "sql", sql, "rows", rows, "elapsed", elapsed, "error", err)
	case l.slow > 0 && elapsed > l.slow:
		sql, rows := fc()
		l.logger.WarnContext(ctx, "sql slow", "sql", sql, "rows", rows, "elapsed", elapsed)
	case l.debug:
		sql, rows := fc()
		l.logger.InfoContext(ctx, "sql", "sql", sql, "rows", rows, "elapsed", elapsed)
	}
}

// callerRefusal reports whether err is the database refusing what a caller
// asked for, which the store answers 4xx: a unique violation (a name or key
// taken, translated where it is read), or an error already translated to a
// client's error (a value PostgreSQL cannot store). Other constraint
// violations are the service's defects (the store validates before it
// writes) and stay errors; a unique violation the store does not translate
// is answered 500, and the API logs that answer at ERROR.
func callerRefusal(err error) bool {
	if sqlState(err) == pgUniqueViolation {
		return true
	}
	var fe *fleet.Error
	if !errors.As(err, &fe) {
		return false
	}
	entry, ok := fleet.LookupErrorCode(fe.Code)
	return ok && entry.Kind != fleet.KindInternal && entry.Kind != fleet.KindUnavailable
}

// constraintOf names the constraint a refusal broke: a name of the schema,
// never a value.
func constraintOf(pgErr *pgconn.PgError) string {
	if pgErr == nil {
		return ""
	}
	return pgErr.ConstraintName
}
