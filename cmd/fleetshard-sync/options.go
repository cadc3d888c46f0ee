package main

import (
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/config"
)

// runOptions is the whole configuration of `run`.
type runOptions struct {
	Log   logOptions
	Agent agent.Config
}

func defaultRunOptions() runOptions {
	return runOptions{Log: logOptions{Format: "json", Level: "info"}, Agent: agent.DefaultConfig()}
}

func (o *runOptions) addFlags(fs *pflag.FlagSet) {
	o.Log.addFlags(fs)
	o.Agent.AddFlags(fs)
}

// validate reports every problem of every part at once.
func (o runOptions) validate() error {
	var p config.Problems
	p.Merge(o.Log.validate())
	p.Merge(o.Agent.Validate())
	return p.Err()
}

// logOptions configures the process's log.
type logOptions struct {
	Format string
	Level  string
}

func (o *logOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", o.Format, "log format: json or text")
	fs.StringVar(&o.Level, "log-level", o.Level, "log level: debug, info, warn or error")
}

func (o logOptions) validate() error {
	var p config.Problems
	if o.Format != "json" && o.Format != "text" {
		p.Addf("log-format", "must be json or text (got %q)", o.Format)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.Level)); err != nil {
		p.Addf("log-level", "must be debug, info, warn or error (got %q)", o.Level)
	}
	return p.Err()
}

// newLogger returns the process's logger, writing to w.
func (o logOptions) newLogger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if o.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("service", "fleetshard-sync")
}
