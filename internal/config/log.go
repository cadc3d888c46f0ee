package config

import (
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
)

// Log configures a process's log: JSON or text, and the level.
type Log struct {
	Format string
	Level  string
}

// DefaultLog returns JSON at info level.
func DefaultLog() Log { return Log{Format: "json", Level: "info"} }

// AddFlags binds the configuration to --log-format and --log-level.
func (o *Log) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", o.Format, "log format: json or text")
	fs.StringVar(&o.Level, "log-level", o.Level, "log level: debug, info, warn or error")
}

// Validate reports every invalid setting, naming its flag.
func (o Log) Validate() error {
	var p Problems
	if o.Format != "json" && o.Format != "text" {
		p.Addf("log-format", "must be json or text (got %q)", o.Format)
	}
	if _, err := o.level(); err != nil {
		p.Addf("log-level", "must be debug, info, warn or error (got %q)", o.Level)
	}
	return p.Err()
}

func (o Log) level() (slog.Level, error) {
	var level slog.Level
	err := level.UnmarshalText([]byte(o.Level))
	return level, err
}

// NewLogger returns the process's logger, writing to w, every record
// carrying the service name. Durations are written for a reader, as
// HumanDuration writes them, in both formats: the JSON handler would write
// nanoseconds. A level Validate rejects logs at info, and the
// logger's first record says so: the commands validate first, so this is a
// caller that did not.
func (o Log) NewLogger(w io.Writer, service string) *slog.Logger {
	level, err := o.level()
	if err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: humanDurations}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if o.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	logger := slog.New(h).With("service", service)
	if err != nil {
		logger.Warn("--log-level not understood, logging at info", "log_level", o.Level, "error", err)
	}
	return logger
}

// humanDurations is the handlers' ReplaceAttr: a duration attribute, at any
// depth of groups, becomes its HumanDuration string.
func humanDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(HumanDuration(a.Value.Duration()))
	}
	return a
}

// HumanDuration is d as time.Duration.String writes it, rounded to four
// significant digits or, from a minute on, to the second (TestHumanDuration
// shows examples): a reader wants the magnitude, not the nanoseconds.
func HumanDuration(d time.Duration) string {
	unit := time.Second
	if d.Abs() < time.Minute {
		unit = 1
		for u := d.Abs() / 1000; u >= 10; u /= 10 {
			unit *= 10
		}
	}
	return d.Round(unit).String()
}
