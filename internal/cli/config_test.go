package cli_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/cli"
)

func TestSaveConfigModes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new", "fleetctl", "config.json")
	cfg := &cli.Config{URL: "http://localhost:8000/api/fleet_manager/v1", AccessToken: "tok", Expiry: time.Unix(1900000000, 0).UTC(),
		TokenURL: "http://sso/token", ClientID: "c", ClientSecret: "s", Scopes: []string{"openid"}}
	if err := cli.SaveConfig(path, cfg); err != nil {
		t.Fatalf("SaveConfig() = %v", err)
	}
	for p, want := range map[string]fs.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("Stat(%s) = %v, %v; want mode %v", p, st.Mode().Perm(), err, want)
		}
	}
	got, err := cli.LoadConfig(path)
	if err != nil || got.URL != cfg.URL || got.AccessToken != "tok" || !got.Expiry.Equal(cfg.Expiry) || got.ClientSecret != "s" || len(got.Scopes) != 1 {
		t.Errorf("LoadConfig() = %+v, %v; want %+v", got, err, cfg)
	}
}

func TestSaveConfigTightensAnExistingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"url":"http://old"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cli.SaveConfig(path, &cli.Config{URL: "http://new/api/fleet_manager/v1", AccessToken: "secret"}); err != nil {
		t.Fatalf("SaveConfig() = %v", err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode after SaveConfig over a 0644 file = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	if err := cli.RemoveConfig(path); err != nil {
		t.Errorf("RemoveConfig() = %v", err)
	}
	if _, err := cli.LoadConfig(path); err == nil {
		t.Errorf("LoadConfig() after RemoveConfig = nil error, want not logged in")
	}
	if err := cli.RemoveConfig(path); err != nil {
		t.Errorf("RemoveConfig() of a missing file = %v, want nil", err)
	}
}

func TestConfigPath(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == cli.ConfigEnv && v != "" {
				return v, true
			}
			return "", false
		}
	}
	if p, err := cli.ConfigPath(env("/x/fleetctl.json")); err != nil || p != "/x/fleetctl.json" {
		t.Errorf("ConfigPath(%s=/x/fleetctl.json) = %q, %v", cli.ConfigEnv, p, err)
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		t.Fatalf("UserConfigDir() = %v", err)
	}
	if p, err := cli.ConfigPath(env("")); err != nil || p != filepath.Join(dir, "fleetctl", "config.json") {
		t.Errorf("ConfigPath() = %q, %v; want under %s", p, err, dir)
	}
}

func TestLoadConfigRefusesABrokenFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.LoadConfig(path); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadConfig(broken) = %v, want a parse error", err)
	}
}
