package agent

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

func TestFileTokenSourceRereadsOnChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	write("first\n", base)
	ts := NewTokenSource(Config{TokenFile: path}, nil)
	for _, step := range []struct {
		content string
		mtime   time.Time
		want    string
	}{
		{"", time.Time{}, "first"},
		{"second", base.Add(time.Second), "second"},                 // rotated
		{"third!", base.Add(2 * time.Second), "third!"},             // same size, new mtime
		{"fourth-token", base.Add(2 * time.Second), "fourth-token"}, // same mtime, new size
	} {
		if step.content != "" {
			write(step.content, step.mtime)
		}
		tok, err := ts.Token()
		if err != nil || tok.AccessToken != step.want {
			t.Errorf("Token() after writing %q = %v, %v, want %q", step.content, tok, err, step.want)
		}
	}
	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := ts.Token(); err == nil {
		t.Errorf("Token() of an empty file = %v, want an error", tok)
	}
}

func TestClientCredentialsTokenSource(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int32
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("ParseForm: %v", err)
		}
		id, secret, _ := r.BasicAuth()
		if r.Form.Get("client_id") != "" {
			id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		if r.Form.Get("grant_type") != "client_credentials" || id != "agent-hub-1" || secret != "s3cret" ||
			r.Form.Get("audience") != "fleet-manager" || r.Form.Get("scope") != "a b" {
			t.Errorf("token request: form %v, client %q/%q", r.Form, id, secret)
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		n := fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		// The second token lives long; the first one expires within the early-expiry margin.
		expires := 3600
		if n == 1 {
			expires = int(tokenEarlyExpiry/time.Second) - 5
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-" + string(rune('0'+n)), "token_type": "bearer", "expires_in": expires})
	}))
	defer idp.Close()
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := NewTokenSource(Config{
		OIDCTokenURL: idp.URL, OIDCClientID: "agent-hub-1", OIDCClientSecretFile: secretFile,
		OIDCAudience: "fleet-manager", OIDCScopes: []string{"a", "b"},
	}, NewTokenHTTPClient())
	for i, want := range []string{"tok-1", "tok-2", "tok-2", "tok-2"} {
		tok, err := ts.Token()
		if err != nil || tok.AccessToken != want {
			t.Fatalf("Token() #%d = %v, %v, want %s", i+1, tok, err, want)
		}
	}
	if n := fetched.Load(); n != 2 {
		t.Errorf("token endpoint called %d times, want 2 (a token about to expire is replaced, a fresh one reused)", n)
	}
}

// TestClientCredentialsAgainstHydra gets the agent's tokens from a real OIDC
// issuer: a signed JWT for the fleet manager's audience, reused while valid.
func TestClientCredentialsAgainstHydra(t *testing.T) {
	t.Parallel()
	issuer := hydratest.Start(t)
	clientID := "fleetshard-sync-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	issuer.CreateClient(t, clientID, "agent-secret", "fleet-manager", "fleet:agent")
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte("agent-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{OIDCTokenURL: issuer.TokenURL(), OIDCClientID: clientID, OIDCClientSecretFile: secretFile,
		OIDCAudience: "fleet-manager", OIDCScopes: []string{"fleet:agent"}}
	ts := NewTokenSource(cfg, NewTokenHTTPClient())
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("Token() from Hydra: %v", err)
	}
	parts := strings.Split(tok.AccessToken, ".")
	if len(parts) != 3 {
		t.Fatalf("Token() = %q, want a JWT", tok.AccessToken)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Sub string   `json:"sub"`
		Aud []string `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Sub != clientID || !slices.Contains(claims.Aud, "fleet-manager") {
		t.Errorf("token claims = %+v, want sub %s and aud fleet-manager", claims, clientID)
	}
	again, err := ts.Token()
	if err != nil || again.AccessToken != tok.AccessToken {
		t.Errorf("second Token() = %v, %v, want the same token reused", again, err)
	}

	// A wrong secret is an error, not a token.
	if err := os.WriteFile(secretFile, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTokenSource(cfg, NewTokenHTTPClient()).Token(); err == nil {
		t.Errorf("Token() with a wrong client secret = nil error, want one")
	}
}
