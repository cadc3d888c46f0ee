package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/cli"
)

// run runs fleetctl with its config file at cfg and returns the exit code,
// stdout and stderr.
func run(t *testing.T, cfg string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := func(k string) (string, bool) {
		if k == cli.ConfigEnv {
			return cfg, true
		}
		return "", false
	}
	code := cli.Run(context.Background(), args, &out, &errOut, env)
	return code, out.String(), errOut.String()
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	unreachable := filepath.Join(dir, "unreachable.json")
	// Port 1 on loopback: nothing listens, the connection is refused.
	if err := cli.SaveConfig(unreachable, &cli.Config{URL: "http://127.0.0.1:1/api/fleet_manager/v1", AccessToken: "tok"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg    string
		args   []string
		code   int
		stderr string
	}{
		{missing, []string{"clusters", "list"}, cli.ExitLocal, "Error: not logged in"},
		{missing, []string{"whoami", "-o", "xml"}, cli.ExitLocal, "Error: -o must be table, json or yaml"},
		{missing, []string{"clusters", "get"}, cli.ExitLocal, "accepts 1 arg"},
		{missing, []string{"clusters", "frobnicate"}, cli.ExitLocal, "Error:"},
		{missing, []string{"login", "--url", "http://localhost:8000"}, cli.ExitLocal, "login needs --token"},
		{missing, []string{"login", "--url", "http://localhost:8000", "--offline-token", "x"}, cli.ExitLocal, "--offline-token needs --token-url and --client-id"},
		{missing, []string{"login", "--url", "localhost", "--token", "x"}, cli.ExitLocal, "--url must be an http or https URL"},
		{missing, []string{"clusters", "update", "c1"}, cli.ExitLocal, "update needs --display-name, --label or -f"},
		{missing, []string{"reservations", "list"}, cli.ExitLocal, "reservations needs --pool ID"},
		{missing, []string{"reservations"}, cli.ExitOK, ""},
		{unreachable, []string{"clusters", "list"}, cli.ExitServer, "connection refused"},
		{unreachable, []string{"get", "/api/fleet_manager/v1/clusters"}, cli.ExitServer, "connection refused"},
	} {
		code, _, stderr := run(t, tc.cfg, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("fleetctl %s = exit %d, stderr %q; want %d, %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.stderr)
		}
	}
}

func TestRunVersionAndCompletion(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.json")
	if code, out, _ := run(t, cfg, "version"); code != cli.ExitOK || !strings.HasPrefix(out, "fleetctl ") {
		t.Errorf("fleetctl version = %d %q", code, out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, stderr := run(t, cfg, "completion", shell)
		if code != cli.ExitOK || !strings.Contains(out, "fleetctl") {
			t.Errorf("fleetctl completion %s = %d, %d bytes, stderr %q", shell, code, len(out), stderr)
		}
	}
}

func TestRunLogout(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := cli.SaveConfig(cfg, &cli.Config{URL: "http://127.0.0.1:1/api/fleet_manager/v1", AccessToken: "tok"}); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, cfg, "logout"); code != cli.ExitOK {
		t.Fatalf("fleetctl logout = %d, %q", code, stderr)
	}
	if code, _, stderr := run(t, cfg, "whoami"); code != cli.ExitLocal || !strings.Contains(stderr, "not logged in") {
		t.Errorf("fleetctl whoami after logout = %d, %q; want not logged in", code, stderr)
	}
}

// TestRunRefusesARedirectToAnotherServer: a server that redirects elsewhere
// does not get fleetctl's token sent there.
func TestRunRefusesARedirectToAnotherServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer api.Close()
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := cli.SaveConfig(cfg, &cli.Config{URL: api.URL + cli.DefaultAPIPath, AccessToken: "secret-token"}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"clusters", "list"}, {"get", "/api/fleet_manager/v1/clusters"}} {
		code, _, stderr := run(t, cfg, args...)
		if code != cli.ExitServer || !strings.Contains(stderr, "redirected to another server") {
			t.Errorf("fleetctl %s redirected away = exit %d, stderr %q; want %d and the refusal", strings.Join(args, " "), code, stderr, cli.ExitServer)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the other server got %d requests (Authorization %q); want none", len(leaked), leaked)
	}
}

// TestLoginRefusesATokenEndpointRedirectToAnotherServer: the token request
// carries the client secret or offline token, so a token endpoint that
// redirects elsewhere does not get it resent there.
func TestLoginRefusesATokenEndpointRedirectToAnotherServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization")+" "+r.PostForm.Encode())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"t","token_type":"Bearer","expires_in":3600}`))
	}))
	defer other.Close()
	sso := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 307 keeps the method and body: the secret would be posted again.
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer sso.Close()
	cfg := filepath.Join(t.TempDir(), "config.json")
	for _, args := range [][]string{
		{"--client-id", "c", "--client-secret", "secret-value"},
		{"--client-id", "c", "--offline-token", "secret-value"},
	} {
		args = append([]string{"login", "--url", other.URL, "--token-url", sso.URL + "/token"}, args...)
		code, _, stderr := run(t, cfg, args...)
		if code == cli.ExitOK || !strings.Contains(stderr, "redirected to another server") {
			t.Errorf("fleetctl %s = exit %d, stderr %q; want the redirect refused", strings.Join(args, " "), code, stderr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the other server got %q; want nothing", leaked)
	}
}
