package postgres_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

func TestReplicaConfigValidate(t *testing.T) {
	t.Parallel()
	valid := postgres.DefaultReplicaConfig()
	valid.Host = "standby.db"
	for _, tc := range []struct {
		name string
		edit func(*postgres.ReplicaConfig)
		want string // a flag named in the error; "" for none
	}{
		{"disabled by default", func(c *postgres.ReplicaConfig) { *c = postgres.DefaultReplicaConfig() }, ""},
		{"disabled ignores the rest", func(c *postgres.ReplicaConfig) { c.Host, c.Port, c.MaxStaleness = "", 0, 0 }, ""},
		{"valid", func(*postgres.ReplicaConfig) {}, ""},
		{"several hosts", func(c *postgres.ReplicaConfig) { c.Host = "a,b" }, "db-read-replica-host"},
		{"bad port", func(c *postgres.ReplicaConfig) { c.Port = 70000 }, "db-read-replica-port"},
		{"no staleness", func(c *postgres.ReplicaConfig) { c.MaxStaleness = 0 }, "db-read-max-staleness"},
		{"interval past half the bound", func(c *postgres.ReplicaConfig) { c.CheckInterval = 3 * time.Second }, "db-read-replica-check-interval"},
		{"interval too short", func(c *postgres.ReplicaConfig) { c.CheckInterval = time.Millisecond }, "db-read-replica-check-interval"},
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
	c := postgres.ReplicaConfig{Host: "standby.db", Port: 6432}
	got := c.DB(primary)
	want := primary
	want.Host, want.Port = "standby.db", 6432
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DB(%+v) = %+v, want %+v", primary, got, want)
	}
}
