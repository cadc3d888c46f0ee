package main

import (
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// dbOptions is the database configuration plus the secrets directory it may
// be read from.
type dbOptions struct {
	postgres.Config
	SecretsDir string
}

// defaultDBOptions is the default configuration of a command's database
// connections; their application_name names the command.
func defaultDBOptions(command string) dbOptions {
	o := dbOptions{Config: postgres.DefaultConfig()}
	o.ApplicationName = applicationName + "/" + command
	return o
}

// applicationName starts the default application_name of every command's
// connections (--db-application-name).
const applicationName = "fleet-manager"

// maxApplicationName leaves room in PostgreSQL's 63 bytes of an
// application_name for the listener's suffix.
const maxApplicationName = 63 - len(postgres.ListenerApplicationSuffix)

func (o *dbOptions) addFlags(fs *pflag.FlagSet) {
	o.Config.AddFlags(fs)
	fs.StringVar(&o.ApplicationName, "db-application-name", o.ApplicationName,
		"application_name of the database connections, which pg_stat_activity shows (the listener's gets "+postgres.ListenerApplicationSuffix+" added)")
	fs.StringVar(&o.SecretsDir, "secrets-dir", o.SecretsDir, "directory of secret files (db.host, db.port, db.name, db.user, db.password, db.sslmode, db.sslrootcert, db.target_session_attrs)")
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

// Validate is the database configuration's validation plus the
// application name's: printable ASCII, short enough for PostgreSQL to keep
// whole.
func (o dbOptions) Validate() error {
	var p config.Problems
	p.Merge(o.Config.Validate())
	if len(o.ApplicationName) > maxApplicationName {
		p.Addf("db-application-name", "must be at most %d bytes (got %d)", maxApplicationName, len(o.ApplicationName))
	}
	for _, c := range o.ApplicationName {
		if c < ' ' || c > '~' {
			p.Addf("db-application-name", "must be printable ASCII (got %q)", o.ApplicationName)
			break
		}
	}
	return p.Err()
}
