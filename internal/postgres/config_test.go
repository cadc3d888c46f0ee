package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*postgres.Config)
		want   []string
	}{
		{"defaults", func(*postgres.Config) {}, nil},
		{"port", func(c *postgres.Config) { c.Port = 0 }, []string{"--db-port: must be between 1 and 65535 (got 0)"}},
		{"host and name", func(c *postgres.Config) { c.Host, c.Name = "", " " }, []string{"--db-host: is required", "--db-name: is required"}},
		{"sslmode", func(c *postgres.Config) { c.SSLMode = "sometimes" }, []string{`--db-sslmode: must be one of`}},
		{"pool", func(c *postgres.Config) { c.MaxOpenConns, c.MaxIdleConns = 2, 5 }, []string{"--db-max-idle-conns: must be between 0 and --db-max-open-conns (2) (got 5)"}},
		{"timeout", func(c *postgres.Config) { c.ConnectTimeout = 0 }, []string{"--db-connect-timeout: must be positive"}},
		{"server timeouts off", func(c *postgres.Config) { c.StatementTimeout, c.LockTimeout, c.IdleInTransactionTimeout = 0, 0, 0 }, nil},
		{"server timeouts", func(c *postgres.Config) { c.StatementTimeout, c.LockTimeout = -time.Second, time.Microsecond }, []string{
			"--db-statement-timeout: must be 0 or a positive number of milliseconds (got -1s)", "--db-lock-timeout: must be 0 or a positive number of milliseconds (got 1µs)"}},
	}
	for _, tc := range cases {
		cfg := postgres.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Validate() = nil, want %q", tc.name, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q, want it to contain %q", tc.name, err, w)
			}
		}
	}
}

func TestDSNEscapesPassword(t *testing.T) {
	t.Parallel()
	cfg := postgres.DefaultConfig()
	cfg.Password = "p@ss word/?"
	cfg.SSLRootCert = "/secrets/db/ca.crt"
	got := cfg.DSN()
	want := "postgres://postgres:p%40ss%20word%2F%3F@127.0.0.1:5432/fleet_manager?connect_timeout=5&idle_in_transaction_session_timeout=60000&plan_cache_mode=force_custom_plan&sslmode=disable&sslrootcert=%2Fsecrets%2Fdb%2Fca.crt&statement_timeout=30000"
	if got != want {
		t.Errorf("DSN() = %q, want %q", got, want)
	}
}
