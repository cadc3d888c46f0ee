package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// gormLogger sends GORM's messages to slog: every statement at info level when
// debug is on, slow statements as warnings, failed ones as errors. Statements
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
