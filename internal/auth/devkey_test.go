package auth_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/onsi/gomega"
)

func TestEnsureDevKeyIsIdempotent(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	dir := filepath.Join(t.TempDir(), "dev-keys")

	first, err := auth.EnsureDevKey(dir)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "EnsureDevKey(%s) first call", dir)
	second, err := auth.EnsureDevKey(dir)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "EnsureDevKey(%s) second call", dir)

	g.Expect(second.KID).To(gomega.Equal(first.KID), "EnsureDevKey(%s).KID", dir)
	g.Expect(second.PrivateKey.Equal(first.PrivateKey)).To(gomega.BeTrue(), "EnsureDevKey(%s).PrivateKey", dir)
	g.Expect(first.PrivateKey.N.BitLen()).To(gomega.Equal(2048), "key size")
	g.Expect(first.JWKSPath).To(gomega.Equal(filepath.Join(dir, "jwks.json")), "JWKSPath")
	raw, err := os.ReadFile(first.JWKSPath)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "ReadFile(%s)", first.JWKSPath)
	var set struct{ Keys []map[string]string }
	g.Expect(json.Unmarshal(raw, &set)).To(gomega.Succeed(), "Unmarshal(jwks.json)")
	g.Expect(set.Keys).To(gomega.ConsistOf(gomega.SatisfyAll(
		gomega.HaveKeyWithValue("kid", first.KID), gomega.HaveKeyWithValue("kty", "RSA"),
		gomega.HaveKeyWithValue("alg", "RS256"), gomega.HaveKeyWithValue("use", "sig"),
	)), "jwks.json keys")

	modes := map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "dev-signing-key.pem"): 0o600}
	for path, want := range modes {
		info, err := os.Stat(path)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "Stat(%s)", path)
		g.Expect(info.Mode().Perm()).To(gomega.Equal(want), "mode of %s", path)
	}
}

func TestMintAuthenticateRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	defaults := auth.DefaultConfig()
	defaults.DevKeyDir = dir
	fork := auth.DefaultConfig()
	fork.DevKeyDir = dir
	fork.DevIssuer = "fork-dev"
	fork.Audience = "fork-api"
	fork.OrgClaim = "org"
	fork.UsernameClaims = []string{"user"}
	fork.RolesClaim = "groups"
	fork.AgentClaims = []string{"client_id"}

	tests := []struct {
		name string
		cfg  auth.Config
		req  auth.TokenRequest
		want fleet.Identity
	}{{
		name: "default config, user",
		cfg:  defaults,
		req:  auth.TokenRequest{OrgID: "org-1", Username: "alice", Roles: []string{"fleet-admin"}, TTL: time.Hour},
		want: fleet.Identity{Subject: "alice", Issuer: "fleet-manager-dev", OrgID: "org-1", Username: "alice",
			Roles: []string{"fleet-admin"}},
	}, {
		name: "default config, agent",
		cfg:  defaults,
		req:  auth.TokenRequest{AgentID: "agent-1", TTL: time.Hour},
		want: fleet.Identity{Subject: "agent-1", Issuer: "fleet-manager-dev", AgentID: "agent-1"},
	}, {
		name: "fork config",
		cfg:  fork,
		req: auth.TokenRequest{OrgID: "o", Username: "bob", Roles: []string{"a", "b"}, AgentID: "c",
			TTL: time.Minute},
		want: fleet.Identity{Subject: "bob", Issuer: "fork-dev", OrgID: "o", Username: "bob",
			Roles: []string{"a", "b"}, AgentID: "c"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			key, err := auth.EnsureDevKey(tt.cfg.DevKeyDir)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "EnsureDevKey(%s)", tt.cfg.DevKeyDir)
			token, err := key.Mint(tt.cfg, tt.req, time.Now())
			g.Expect(err).NotTo(gomega.HaveOccurred(), "Mint(%s)", tt.name)
			got, err := newVerifier(t, tt.cfg).Authenticate(context.Background(), token)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "Authenticate(Mint(%s))", tt.name)
			g.Expect(got).To(gomega.Equal(tt.want), "Authenticate(Mint(%s))", tt.name)
		})
	}
}

func TestMintedTokenChecks(t *testing.T) {
	t.Parallel()
	cfg := auth.DefaultConfig()
	cfg.DevKeyDir = t.TempDir()
	key, err := auth.EnsureDevKey(cfg.DevKeyDir)
	if err != nil {
		t.Fatalf("EnsureDevKey(%s) = %v", cfg.DevKeyDir, err)
	}
	v := newVerifier(t, cfg)
	user := auth.TokenRequest{Username: "alice", TTL: time.Hour}
	other := cfg
	other.Audience = "someone-else"

	tests := []struct {
		name string
		cfg  auth.Config
		req  auth.TokenRequest
		now  time.Time
		want string
	}{
		{"expired", cfg, user, time.Now().Add(-2 * time.Hour), "token is expired"},
		{"not yet valid", cfg, user, time.Now().Add(time.Hour), "token is not valid yet"},
		{"other issuer", cfg, auth.TokenRequest{Username: "a", TTL: time.Hour, Issuer: "x"}, time.Now(),
			"token issuer is not accepted"},
		{"audience not configured is not checked", other, user, time.Now(), ""},
	}
	for _, tt := range tests {
		token, err := key.Mint(tt.cfg, tt.req, tt.now)
		if err != nil {
			t.Fatalf("Mint(%s) = %v", tt.name, err)
		}
		_, err = v.Authenticate(context.Background(), token)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Authenticate(%s) = %v, want nil", tt.name, err)
			}
			continue
		}
		checkUnauthenticated(t, "Authenticate("+tt.name+")", token, err, tt.want)
	}
}

func TestMintErrors(t *testing.T) {
	t.Parallel()
	key, err := auth.EnsureDevKey(t.TempDir())
	if err != nil {
		t.Fatalf("EnsureDevKey() = %v", err)
	}
	clash := auth.DefaultConfig()
	clash.OrgClaim = "realm_access"
	tests := []struct {
		name string
		cfg  auth.Config
		req  auth.TokenRequest
	}{
		{"no TTL", auth.DefaultConfig(), auth.TokenRequest{Username: "a"}},
		{"no subject", auth.DefaultConfig(), auth.TokenRequest{OrgID: "o", TTL: time.Hour}},
		{"no issuer", auth.Config{}, auth.TokenRequest{Username: "a", TTL: time.Hour}},
		{"claim paths collide", clash, auth.TokenRequest{Username: "a", OrgID: "o", Roles: []string{"r"}, TTL: time.Hour}},
	}
	for _, tt := range tests {
		if token, err := key.Mint(tt.cfg, tt.req, time.Now()); err == nil {
			t.Errorf("Mint(%s) = %d bytes, nil error; want an error", tt.name, len(token))
		}
	}
}
