package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/postgres/rdsiam"
)

// PasswordFunc returns the password for a new connection to host:port as
// user. It is called for every connection the pool or the listener opens, so
// a short-lived credential (an RDS IAM authentication token) is always fresh
// when the server checks it; an open connection never needs it again.
type PasswordFunc func(ctx context.Context, host string, port uint16, user string) (string, error)

// IAMAuth is the configuration of RDS IAM database authentication: instead of
// --db-password, every new connection signs a token with the AWS credentials
// the process holds (environment, web identity of the pod's service account,
// instance profile) and sends it as its password.
type IAMAuth struct {
	Enabled bool
	// Region is the AWS region of the database instance, part of what the
	// token signs.
	Region string
}

func (a *IAMAuth) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&a.Enabled, "db-iam-auth", a.Enabled,
		"sign in with an RDS IAM authentication token, made for every new connection, instead of --db-password (needs --db-iam-region and TLS)")
	fs.StringVar(&a.Region, "db-iam-region", a.Region, "AWS region of the RDS instance, for --db-iam-auth")
}

func (a IAMAuth) validate(c Config, p *config.Problems) {
	if !a.Enabled {
		if a.Region != "" {
			p.Addf("db-iam-region", "is only used with --db-iam-auth")
		}
		return
	}
	if strings.TrimSpace(a.Region) == "" {
		p.Addf("db-iam-region", "is required with --db-iam-auth")
	}
	if c.Password != "" {
		p.Addf("db-iam-auth", "and --db-password (or the secret's db.password) exclude each other")
	}
	switch c.SSLMode {
	case "require", "verify-ca", "verify-full":
	default:
		p.Addf("db-iam-auth", "needs TLS: --db-sslmode require, verify-ca or verify-full (got %q)", c.SSLMode)
	}
}

// passwords returns where new connections take their password from:
// c.Passwords when set, RDS tokens (rdsiam) with --db-iam-auth, else nil
// (the DSN's password).
func (c Config) passwords(ctx context.Context) (PasswordFunc, error) {
	if c.Passwords != nil {
		return c.Passwords, nil
	}
	if !c.IAM.Enabled {
		return nil, nil
	}
	tokens, err := rdsiam.DefaultTokens(ctx, c.IAM.Region)
	if err != nil {
		return nil, fmt.Errorf("passwords: %w", err)
	}
	return PasswordFunc(tokens), nil
}

// beforeConnect sets the password of a connection about to open.
func beforeConnect(passwords PasswordFunc) func(context.Context, *pgx.ConnConfig) error {
	return func(ctx context.Context, cc *pgx.ConnConfig) error {
		pw, err := passwords(ctx, cc.Host, cc.Port, cc.User)
		if err != nil {
			return err
		}
		// A multi-host DSN shares this password among its hosts (pgx has
		// none per host); a token signs one endpoint, so IAM authentication
		// is for the one endpoint RDS gives.
		cc.Password = pw
		return nil
	}
}

// connect opens one connection outside the pool (the listener's), with a
// fresh password when there is a PasswordFunc.
func (c Config) connect(ctx context.Context) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(c.DSN())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	passwords, err := c.passwords(ctx)
	if err != nil {
		return nil, err
	}
	if passwords != nil {
		if err := beforeConnect(passwords)(ctx, cc); err != nil {
			return nil, err
		}
	}
	return pgx.ConnectConfig(ctx, cc)
}
