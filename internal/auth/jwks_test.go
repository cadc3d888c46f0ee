package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/onsi/gomega"
)

func TestAuthenticateUnknownKIDRefreshes(t *testing.T) {
	t.Parallel()
	known, unknown := newRSAKey(t, "known"), newRSAKey(t, "unknown")
	srv := newJWKSServer(t, known)
	v := newVerifier(t, urlConfig(srv.URL))
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("JWKS requests after NewVerifier() = %d, want 1", got)
	}

	token := unknown.sign(t, validClaims())
	_, err := v.Authenticate(context.Background(), token)
	checkUnauthenticated(t, "Authenticate(unknown kid)", token, err, "token signing key is not known")
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("JWKS requests after Authenticate(unknown kid) = %d, want 2", got)
	}
}

func TestAuthenticateAfterJWKSRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := newRSAKey(t, "2024"), newRSAKey(t, "2025")
	srv := newJWKSServer(t, oldKey)
	v := newVerifier(t, urlConfig(srv.URL))
	g := gomega.NewWithT(t)

	_, err := v.Authenticate(context.Background(), oldKey.sign(t, validClaims()))
	g.Expect(err).NotTo(gomega.HaveOccurred(), "Authenticate(old kid) before rotation")

	srv.serve(t, newKey)
	id, err := v.Authenticate(context.Background(), newKey.sign(t, validClaims()))
	g.Expect(err).NotTo(gomega.HaveOccurred(), "Authenticate(new kid) after rotation")
	g.Expect(id.Username).To(gomega.Equal("alice"), "Authenticate(new kid).Username")
	g.Expect(srv.hits.Load()).To(gomega.BeEquivalentTo(2), "JWKS requests")

	// The refresh replaced the set, so the retired key is no longer trusted.
	oldToken := oldKey.sign(t, validClaims())
	_, err = v.Authenticate(context.Background(), oldToken)
	checkUnauthenticated(t, "Authenticate(old kid) after rotation", oldToken, err, "token signing key is not known")
}

func TestAuthenticateUnknownKIDRateLimit(t *testing.T) {
	t.Parallel()
	known := newRSAKey(t, "known")
	srv := newJWKSServer(t, known)
	cfg := urlConfig(srv.URL)
	v := newVerifier(t, cfg)

	// Every token names another kid; within the one-minute window only the
	// first may cause a request, the rest are refused without one.
	signer := newRSAKey(t, "")
	for i := range 25 {
		signer.kid = fmt.Sprintf("attacker-%d", i)
		token := signer.sign(t, validClaims())
		_, err := v.Authenticate(context.Background(), token)
		checkUnauthenticated(t, fmt.Sprintf("Authenticate(%s)", signer.kid), token, err, "token signing key is not known")
	}
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("JWKS requests after 25 unknown kids within %s = %d, want 2 (initial + one refresh)",
			cfg.JWKSRefreshRateLimit, got)
	}
	if _, err := v.Authenticate(context.Background(), known.sign(t, validClaims())); err != nil {
		t.Errorf("Authenticate(known kid) = %v, want nil", err)
	}
}

func TestAuthenticateJWKSFile(t *testing.T) {
	t.Parallel()
	fileKey, encKey, urlKey := newRSAKey(t, "file"), newRSAKey(t, "enc"), newECKey(t, "url")
	path := filepath.Join(t.TempDir(), "jwks.json")
	encJWK := encKey.jwk(t)
	encJWK["use"] = "enc"
	body, err := json.Marshal(map[string]any{"keys": []map[string]string{fileKey.jwk(t), encJWK}})
	if err != nil {
		t.Fatalf("json.Marshal(jwks) = %v", err)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatalf("WriteFile(%s) = %v", path, err)
	}

	fileOnly := auth.DefaultConfig()
	fileOnly.JWKSFile = path
	fileOnly.Issuers = []string{testIssuer}
	both := urlConfig(newJWKSServer(t, urlKey).URL)
	both.JWKSFile = path

	tests := []struct {
		name    string
		cfg     auth.Config
		key     testKey
		wantErr string
	}{
		{"file only, file key", fileOnly, fileKey, ""},
		{"file only, key not for signatures", fileOnly, encKey, "token signing key is not known"},
		{"file only, key of the URL", fileOnly, urlKey, "token signing key is not known"},
		{"file and URL, file key", both, fileKey, ""},
		{"file and URL, URL key", both, urlKey, ""},
	}
	for _, tt := range tests {
		v := newVerifier(t, tt.cfg)
		token := tt.key.sign(t, validClaims())
		_, err := v.Authenticate(context.Background(), token)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("Authenticate(%s) = %v, want nil", tt.name, err)
			}
			continue
		}
		checkUnauthenticated(t, "Authenticate("+tt.name+")", token, err, tt.wantErr)
	}
}

func TestNewVerifierErrors(t *testing.T) {
	t.Parallel()
	down := newJWKSServer(t)
	down.Close()
	badFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(badFile, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatalf("WriteFile(%s) = %v", badFile, err)
	}
	noKeys := auth.DefaultConfig()
	noKeys.Issuers = []string{testIssuer}
	noKeys.JWKSFile = badFile
	missing := noKeys
	missing.JWKSFile = filepath.Join(t.TempDir(), "absent.json")

	tests := []struct {
		name string
		cfg  auth.Config
		want string
	}{
		{"invalid config", auth.DefaultConfig(), "--auth-jwks-url"},
		{"JWKS URL unreachable", urlConfig(down.URL), "fetching JWKS"},
		{"JWKS file without keys", noKeys, "no usable signing key"},
		{"JWKS file missing", missing, "reading --auth-jwks-file"},
	}
	for _, tt := range tests {
		g := gomega.NewWithT(t)
		v, err := auth.NewVerifier(context.Background(), tt.cfg, nil, nil)
		g.Expect(v).To(gomega.BeNil(), "NewVerifier(%s)", tt.name)
		g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tt.want)), "NewVerifier(%s)", tt.name)
	}
}
