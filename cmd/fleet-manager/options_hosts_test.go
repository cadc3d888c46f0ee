package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestSecretListsSeveralDatabaseHosts: a secret naming every Patroni node,
// a port each and the session wanted gives a DSN over all of them.
func TestSecretListsSeveralDatabaseHosts(t *testing.T) {
	t.Parallel()
	secrets := t.TempDir()
	for name, value := range map[string]string{
		"db.host": "db1.example.com,db2.example.com\n", "db.port": "5432,5433\n", "db.target_session_attrs": "primary\n",
	} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := defaultDBOptions("serve")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	opts.addFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := complete(fs, mapEnv(map[string]string{"FLEET_MANAGER_SECRETS_DIR": secrets}), &opts.SecretsDir); err != nil {
		t.Fatalf("complete(): %v", err)
	}
	if err := opts.Config.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	dsn := opts.DSN()
	for _, want := range []string{"@db1.example.com:5432,db2.example.com:5433/", "target_session_attrs=primary"} {
		if !strings.Contains(dsn, want) {
			t.Errorf("DSN() = %q, want it to contain %q", dsn, want)
		}
	}
}
