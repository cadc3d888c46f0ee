package config

import (
	"io"
	"log/slog"

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
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.Level)); err != nil {
		p.Addf("log-level", "must be debug, info, warn or error (got %q)", o.Level)
	}
	return p.Err()
}

// NewLogger returns the process's logger, writing to w, every record
// carrying the service name.
func (o Log) NewLogger(w io.Writer, service string) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if o.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("service", service)
}
