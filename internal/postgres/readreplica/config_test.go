package readreplica_test

import (
	"github.com/jackc/pgx/v5"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica"
)

func TestReplicaConfigValidate(t *testing.T) {
	t.Parallel()
	valid := readreplica.DefaultConfig()
	valid.Host = "standby.db"
	for _, tc := range []struct {
		name string
		edit func(*readreplica.Config)
		want string // a flag named in the error; "" for none
	}{
		{"disabled by default", func(c *readreplica.Config) { *c = readreplica.DefaultConfig() }, ""},
		{"disabled ignores the rest", func(c *readreplica.Config) { c.Host, c.Port, c.MaxStaleness = "", 0, 0 }, ""},
		{"valid", func(*readreplica.Config) {}, ""},
		{"several hosts", func(c *readreplica.Config) { c.Host = "a,b" }, "db-read-replica-host"},
		{"bad port", func(c *readreplica.Config) { c.Port = 70000 }, "db-read-replica-port"},
		{"no staleness", func(c *readreplica.Config) { c.MaxStaleness = 0 }, "db-read-max-staleness"},
		{"interval past half the bound", func(c *readreplica.Config) { c.CheckInterval = 3 * time.Second }, "db-read-replica-check-interval"},
		{"interval too short", func(c *readreplica.Config) { c.CheckInterval = time.Millisecond }, "db-read-replica-check-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", c, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate(%+v) = %v, want an error naming --%s", c, err, tc.want)
			}
		})
	}
}

func TestReplicaConfigDBIsThePrimarysOnTheReplicaHost(t *testing.T) {
	t.Parallel()
	primary := postgres.DefaultConfig()
	primary.Password, primary.SSLMode = "secret", "verify-full"
	c := readreplica.Config{Host: "standby.db", Port: 6432}
	got := c.DB(primary)
	want := primary
	want.Host, want.Port, want.TargetSessionAttrs = "standby.db", 6432, "any"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DB(%+v) = %+v, want %+v", primary, got, want)
	}
}

// TestReplicaDBLeavesThePrimarysHosts shows the replica's connection is its
// one host, whatever hosts and target the primary's names.
func TestReplicaDBLeavesThePrimarysHosts(t *testing.T) {
	primary := postgres.DefaultConfig()
	primary.Host, primary.Ports, primary.TargetSessionAttrs = "db-0,db-1", []int{5432, 5433}, "read-write"
	replica := readreplica.DefaultConfig()
	replica.Host, replica.Port = "db-ro", 6432
	dsn := replica.DB(primary).DSN()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", dsn, err)
	}
	if cc.Host != "db-ro" || cc.Port != 6432 || len(cc.Fallbacks) != 0 {
		t.Errorf("replica DSN %s connects to %s:%d with %d fallbacks, want db-ro:6432 alone", dsn, cc.Host, cc.Port, len(cc.Fallbacks))
	}
	if attrs := cc.RuntimeParams["target_session_attrs"]; attrs != "" {
		t.Errorf("replica DSN %s sends target_session_attrs %q as a runtime parameter", dsn, attrs)
	}
	if cc.ValidateConnect != nil {
		t.Errorf("replica DSN %s validates its connection (a target_session_attrs other than any)", dsn)
	}
}
