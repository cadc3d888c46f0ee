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

func defaultDBOptions() dbOptions { return dbOptions{Config: postgres.DefaultConfig()} }

func (o *dbOptions) addFlags(fs *pflag.FlagSet) {
	o.Config.AddFlags(fs)
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
