package cli_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/cli"
)

// recorder is an API and token endpoint that records the credentials each
// request carried.
type recorder struct {
	mu   sync.Mutex
	seen []string
	srv  *httptest.Server
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.PostForm.Encode())
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/token") {
			_, _ = w.Write([]byte(`{"access_token":"fetched-token","token_type":"Bearer","expires_in":3600}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"CurrentUser","username":"alice","org_id":"org-1","roles":[]}`))
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// remote is the server's URL with host 0.0.0.0: not a loopback address, so
// fleetctl must take it for another host, yet Linux connects it to this one,
// so the test sees whatever fleetctl would have sent.
func (rec *recorder) remote() string {
	return strings.Replace(rec.srv.URL, "127.0.0.1", "0.0.0.0", 1)
}

func (rec *recorder) requests() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.seen...)
}

// TestLoginRefusesPlainHTTPToAnotherHost: a token sent over plain HTTP to
// another host can be read on the way, so login refuses it unless asked
// with --insecure-http, and neither sends nor stores anything.
func TestLoginRefusesPlainHTTPToAnotherHost(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	loopback := rec.srv.URL
	for _, args := range [][]string{
		{"login", "--url", rec.remote(), "--token", "secret-token"},
		{"login", "--url", rec.remote(), "--token-url", loopback + "/token", "--client-id", "c", "--client-secret", "secret-token"},
		{"login", "--url", loopback, "--token-url", rec.remote() + "/token", "--client-id", "c", "--client-secret", "secret-token"},
		{"login", "--url", loopback, "--token-url", rec.remote() + "/token", "--client-id", "c", "--offline-token", "secret-token"},
	} {
		cfg := filepath.Join(t.TempDir(), "config.json")
		code, _, stderr := run(t, cfg, args...)
		if code != cli.ExitLocal || !strings.Contains(stderr, "plain HTTP") || !strings.Contains(stderr, "--insecure-http") {
			t.Errorf("fleetctl %s = exit %d, stderr %q; want %d and why", strings.Join(args, " "), code, stderr, cli.ExitLocal)
		}
		if strings.Contains(stderr, "secret-token") {
			t.Errorf("fleetctl %s printed the secret: %q", strings.Join(args, " "), stderr)
		}
		if _, err := os.Stat(cfg); !os.IsNotExist(err) {
			t.Errorf("fleetctl %s wrote the config file (%v); want none", strings.Join(args, " "), err)
		}
	}
	if got := rec.requests(); len(got) != 0 {
		t.Errorf("the server got %q; want no request", got)
	}
}

func TestLoginSendsPlainHTTPToAnotherHostWhenAsked(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := filepath.Join(t.TempDir(), "config.json")
	code, _, stderr := run(t, cfg, "login", "--url", rec.remote(), "--token", "secret-token", "--insecure-http")
	if code != cli.ExitOK {
		t.Fatalf("fleetctl login --insecure-http = exit %d, stderr %q; want 0", code, stderr)
	}
	saved, err := cli.LoadConfig(cfg)
	if err != nil || !saved.InsecureHTTP || saved.AccessToken != "secret-token" {
		t.Fatalf("the config after login --insecure-http = %+v, %v; want the token and insecure_http", saved, err)
	}
	// The saved login carries the choice: later commands use the server.
	if code, _, stderr := run(t, cfg, "whoami"); code != cli.ExitOK {
		t.Errorf("fleetctl whoami after login --insecure-http = exit %d, stderr %q; want 0", code, stderr)
	}
	got := rec.requests()
	if len(got) != 2 || !strings.Contains(got[0], "Bearer secret-token") {
		t.Errorf("the server got %q; want login's and whoami's requests with the token", got)
	}
}

func TestLoginSendsPlainHTTPToLoopback(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	for _, url := range []string{rec.srv.URL, strings.Replace(rec.srv.URL, "127.0.0.1", "localhost", 1)} {
		cfg := filepath.Join(t.TempDir(), "config.json")
		if code, _, stderr := run(t, cfg, "login", "--url", url, "--token", "secret-token"); code != cli.ExitOK {
			t.Errorf("fleetctl login --url %s = exit %d, stderr %q; want 0", url, code, stderr)
		}
		if code, _, stderr := run(t, cfg, "login", "--url", url, "--token-url", url+"/token", "--client-id", "c", "--client-secret", "s"); code != cli.ExitOK {
			t.Errorf("fleetctl login --url %s --token-url = exit %d, stderr %q; want 0", url, code, stderr)
		}
	}
	if got := rec.requests(); len(got) != 6 {
		t.Errorf("the server got %q; want three requests for each host (current_user, token, current_user)", got)
	}
}

// TestSavedPlainHTTPURLOfAnotherHostIsRefused: a config file written
// without --insecure-http (by hand, or by a fleetctl before the check) does
// not send its token over plain HTTP to another host either.
func TestSavedPlainHTTPURLOfAnotherHostIsRefused(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	for _, saved := range []*cli.Config{
		{URL: rec.remote() + cli.DefaultAPIPath, AccessToken: "secret-token"},
		{URL: rec.srv.URL + cli.DefaultAPIPath, TokenURL: rec.remote() + "/token", ClientID: "c", ClientSecret: "secret-token"},
	} {
		cfg := filepath.Join(t.TempDir(), "config.json")
		if err := cli.SaveConfig(cfg, saved); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"clusters", "list"}, {"whoami"}, {"get", "/api/fleet_manager/v1/clusters"}} {
			code, _, stderr := run(t, cfg, args...)
			if code != cli.ExitLocal || !strings.Contains(stderr, "--insecure-http") {
				t.Errorf("fleetctl %s with %+v = exit %d, stderr %q; want %d and why", strings.Join(args, " "), saved, code, stderr, cli.ExitLocal)
			}
		}
	}
	if got := rec.requests(); len(got) != 0 {
		t.Errorf("the server got %q; want no request", got)
	}
}
