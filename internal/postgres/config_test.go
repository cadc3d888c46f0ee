package postgres_test

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/pflag"

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
		{"wait bound", func(c *postgres.Config) { c.WaitTimeout = 0 }, []string{"--db-wait-timeout: must be positive"}},
		{"several hosts, one port", func(c *postgres.Config) { c.Host = "db1,db2" }, nil},
		{"several hosts, a port each", func(c *postgres.Config) { c.Host, c.Ports = "db1,db2", []int{5432, 5433} }, nil},
		{"ports not matching hosts", func(c *postgres.Config) { c.Host, c.Ports = "db1,db2,db3", []int{5432, 5433} }, []string{
			"--db-port: lists 2 ports for 3 hosts of --db-host"}},
		{"port in a list", func(c *postgres.Config) { c.Host, c.Ports = "db1,db2", []int{5432, 70000} }, []string{"--db-port: must be between 1 and 65535 (got 70000)"}},
		{"empty host in a list", func(c *postgres.Config) { c.Host = "db1,,db2" }, []string{"--db-host: must be host names or addresses separated by commas"}},
		{"target session attrs", func(c *postgres.Config) { c.TargetSessionAttrs = "primary" }, nil},
		{"unknown target session attrs", func(c *postgres.Config) { c.TargetSessionAttrs = "master" }, []string{
			`--db-target-session-attrs: must be one of any, read-write, read-only, primary, standby, prefer-standby (got "master")`}},
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

func TestDSNHostsAndTargetSessionAttrs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		flags []string
		want  string // the DSN's host part and its target_session_attrs
	}{
		{"one host", nil, "127.0.0.1:5432 tsa="},
		{"one host, read-write asked", []string{"--db-target-session-attrs=read-write"}, "127.0.0.1:5432 tsa=read-write"},
		{"several hosts, one port", []string{"--db-host=db1, db2", "--db-port=6432"}, "db1:6432,db2:6432 tsa=read-write"},
		{"several hosts, a port each", []string{"--db-host=127.0.0.1,127.0.0.1", "--db-port=5432,5433"}, "127.0.0.1:5432,127.0.0.1:5433 tsa=read-write"},
		{"several hosts, any", []string{"--db-host=db1,db2", "--db-target-session-attrs=any"}, "db1:5432,db2:5432 tsa="},
		{"several hosts, prefer a standby", []string{"--db-host=db1,db2", "--db-target-session-attrs=prefer-standby"}, "db1:5432,db2:5432 tsa=prefer-standby"},
		{"IPv6", []string{"--db-host=::1,db2"}, "[::1]:5432,db2:5432 tsa=read-write"},
	}
	for _, tc := range cases {
		cfg := postgres.DefaultConfig()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(tc.flags); err != nil {
			t.Fatalf("%s: Parse(%q) = %v", tc.name, tc.flags, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
		// pgx reads it as libpq does: the first host and a fallback for
		// each other one, in order (one each with sslmode=disable).
		pc, err := pgconn.ParseConfig(cfg.DSN())
		if err != nil {
			t.Fatalf("%s: pgconn.ParseConfig(%q) = %v", tc.name, cfg.DSN(), err)
		}
		hosts := []string{net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))}
		for _, fb := range pc.Fallbacks {
			hosts = append(hosts, net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port))))
		}
		_, query, _ := strings.Cut(cfg.DSN(), "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatalf("%s: DSN() %q: %v", tc.name, cfg.DSN(), err)
		}
		if got := strings.Join(hosts, ",") + " tsa=" + q.Get("target_session_attrs"); got != tc.want {
			t.Errorf("%s: DSN() = %q: got %q, want %q", tc.name, cfg.DSN(), got, tc.want)
		}
		if checks := pc.ValidateConnect != nil; checks != strings.Contains(tc.want, "tsa=read-write") && !strings.Contains(tc.want, "tsa=prefer") {
			t.Errorf("%s: pgx checks the session: %v, for %q", tc.name, checks, cfg.DSN())
		}
	}
}

func TestPortFlagRejectsWords(t *testing.T) {
	t.Parallel()
	cfg := postgres.DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	err := fs.Parse([]string{"--db-port=5432,five"})
	if err == nil || !strings.Contains(err.Error(), `port "five": not a number`) {
		t.Errorf("Parse(--db-port=5432,five) = %v, want the word named", err)
	}
	if err := fs.Parse([]string{"--db-port=5433"}); err != nil || cfg.Port != 5433 || cfg.Ports != nil {
		t.Errorf("Parse(--db-port=5433) = %v: Port %d, Ports %v", err, cfg.Port, cfg.Ports)
	}
}
