package main

import (
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// logOptions configures the process's log.
type logOptions struct {
	Format string
	Level  string
}

func defaultLogOptions() logOptions { return logOptions{Format: "json", Level: "info"} }

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
func (o logOptions) newLogger(w io.Writer, service string) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if o.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("service", service)
}

// dbOptions is the database configuration plus the secrets directory it may
// be read from.
type dbOptions struct {
	postgres.Config
	SecretsDir string
}

func defaultDBOptions() dbOptions { return dbOptions{Config: postgres.DefaultConfig()} }

func (o *dbOptions) addFlags(fs *pflag.FlagSet) {
	o.Config.AddFlags(fs)
	fs.StringVar(&o.SecretsDir, "secrets-dir", o.SecretsDir, "directory of secret files (db.host, db.port, db.name, db.user, db.password, db.sslmode, db.sslrootcert)")
}

// complete fills flags from the environment, then from the secrets directory:
// a flag on the command line wins over the environment, which wins over a
// secret file, which wins over the default.
func complete(fs *pflag.FlagSet, env lookupEnv, secretsDir *string) error {
	if err := config.BindEnv(fs, envPrefix, env); err != nil {
		return err
	}
	envSet := func(flag string) bool {
		_, ok := env(config.EnvName(envPrefix, flag))
		return ok
	}
	return config.BindSecrets(fs, *secretsDir, postgres.SecretFiles(), envSet)
}

// joinProblems validates every component and reports all problems at once.
func joinProblems(validators ...func() error) error {
	var p config.Problems
	for _, v := range validators {
		p.Merge(v())
	}
	return p.Err()
}
