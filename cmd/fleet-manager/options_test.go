package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestCompletePrecedence(t *testing.T) {
	t.Parallel()
	secrets := t.TempDir()
	for name, value := range map[string]string{
		"db.host": "db-from-secret\n", "db.port": "6000", "db.name": "name-from-secret", "db.password": "pw-from-secret\n",
	} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{
		"FLEET_MANAGER_DB_PORT":     "7000",
		"FLEET_MANAGER_DB_NAME":     "name-from-env",
		"FLEET_MANAGER_SECRETS_DIR": secrets,
	}
	opts := defaultDBOptions("test")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	opts.addFlags(fs)
	if err := fs.Parse([]string{"--db-name=name-from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := complete(fs, mapEnv(env), &opts.SecretsDir); err != nil {
		t.Fatalf("complete(): %v", err)
	}
	cases := []struct{ setting, got, want string }{
		{"db-host (secret over default)", opts.Host, "db-from-secret"},
		{"db-port (env over secret)", strconv.Itoa(opts.Port), "7000"},
		{"db-name (flag over env and secret)", opts.Name, "name-from-flag"},
		{"db-password (secret, trimmed)", opts.Password, "pw-from-secret"},
		{"db-user (default)", opts.User, "postgres"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.setting, tc.got, tc.want)
		}
	}
}

func TestCompleteReportsBadEnvironment(t *testing.T) {
	t.Parallel()
	opts := defaultDBOptions("test")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	opts.addFlags(fs)
	err := complete(fs, mapEnv(map[string]string{"FLEET_MANAGER_DB_PORT": "fivefourthreetwo"}), &opts.SecretsDir)
	if err == nil || !strings.Contains(err.Error(), "FLEET_MANAGER_DB_PORT (for --db-port)") {
		t.Errorf("complete() with a non-numeric port = %v, want an error naming the variable and the flag", err)
	}
}

func TestServeValidatesEveryComponent(t *testing.T) {
	t.Parallel()
	_, stderr, err := execute(t, nil, "serve",
		"--db-port=0", "--log-format=xml", "--api-base-path=api/", "--error-code-prefix=bad prefix",
		"--cors-allowed-origins=*", "--cors-allow-credentials", "--auth-jwks-url=ftp://x", "--auth-issuers=",
		"--db-read-replica-host=standby.db", "--db-read-max-staleness=0s",
		"--user-metrics-backend-url=http://thanos:9090", "--api-request-timeout=5s", "--user-metrics-max-range=0s")
	if err == nil {
		t.Fatalf("serve with bad settings succeeded; stderr: %s", stderr)
	}
	for _, want := range []string{
		"--db-port: must be between 1 and 65535",
		"--log-format: must be json or text",
		"--api-base-path: must start with /",
		"--error-code-prefix: must be upper-case",
		"--cors-allow-credentials: cannot be true",
		"--auth-jwks-url:",
		"--db-read-max-staleness: must be positive",
		"--user-metrics-backend-timeout: must be below --api-request-timeout 5s",
		"--user-metrics-max-range: must be positive",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("serve error = %q, want it to contain %q", err, want)
		}
	}
}

// TestServeIgnoresTheMetricsTimeoutWithoutABackend: a deployment without a
// metrics backend may shorten --api-request-timeout below the backend
// timeout it does not use.
func TestServeIgnoresTheMetricsTimeoutWithoutABackend(t *testing.T) {
	t.Parallel()
	opts := defaultServeOptions()
	opts.HTTP.RequestTimeout = 3 * time.Second
	if err := opts.validateUserMetricsTimeout(); err != nil {
		t.Errorf("validateUserMetricsTimeout() without a backend = %v, want nil", err)
	}
	opts.UserMetrics.BackendURL = "http://thanos:9090"
	if err := opts.validateUserMetricsTimeout(); err == nil || !strings.Contains(err.Error(), "--user-metrics-backend-timeout") {
		t.Errorf("validateUserMetricsTimeout() with a backend = %v, want it to name --user-metrics-backend-timeout", err)
	}
}

func mapEnv(m map[string]string) lookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
