package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/golang-jwt/jwt/v4"
	"github.com/onsi/gomega"
)

func TestAuthenticateValid(t *testing.T) {
	t.Parallel()
	rsaKey, ecKey := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")
	srv := newJWKSServer(t, rsaKey, ecKey)
	cfg := urlConfig(srv.URL)
	cfg.Audience = testAudience
	v := newVerifier(t, cfg)

	tests := []struct {
		name   string
		key    testKey
		claims jwt.MapClaims
		want   fleet.Identity
	}{{
		name:   "user token",
		key:    rsaKey,
		claims: validClaims(),
		want: fleet.Identity{Subject: "f:1234:alice", Issuer: testIssuer, OrgID: "org-1",
			Username: "alice", Roles: []string{"fleet-admin", "user"}},
	}, {
		name:   "username falls back to preferred_username, ES256, aud as a string",
		key:    ecKey,
		claims: with(validClaims(), map[string]any{"username": nil, "preferred_username": "bob", "aud": testAudience}),
		want: fleet.Identity{Subject: "f:1234:alice", Issuer: testIssuer, OrgID: "org-1",
			Username: "bob", Roles: []string{"fleet-admin", "user"}},
	}, {
		name: "agent from clientId, a service account's claim, no roles",
		key:  rsaKey,
		claims: with(validClaims(), map[string]any{"username": nil, "org_id": nil, "realm_access": nil,
			"sub": "service-account-agent", "clientId": "agent-7", "azp": "agent-7"}),
		want: fleet.Identity{Subject: "service-account-agent", Issuer: testIssuer, AgentID: "agent-7"},
	}, {
		// Every token has azp, a user's too: by default it names no agent.
		name:   "azp alone is no agent",
		key:    rsaKey,
		claims: with(validClaims(), map[string]any{"azp": "agent-2"}),
		want: fleet.Identity{Subject: "f:1234:alice", Issuer: testIssuer, OrgID: "org-1",
			Username: "alice", Roles: []string{"fleet-admin", "user"}},
	}, {
		name:   "expired within the clock skew",
		key:    rsaKey,
		claims: with(validClaims(), map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix()}),
		want: fleet.Identity{Subject: "f:1234:alice", Issuer: testIssuer, OrgID: "org-1",
			Username: "alice", Roles: []string{"fleet-admin", "user"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			got, err := v.Authenticate(context.Background(), tt.key.sign(t, tt.claims))
			g.Expect(err).NotTo(gomega.HaveOccurred(), "Authenticate(%s)", tt.name)
			if len(tt.want.Roles) == 0 {
				g.Expect(got.Roles).To(gomega.BeEmpty(), "Authenticate(%s).Roles", tt.name)
				got.Roles = nil
			}
			g.Expect(got).To(gomega.Equal(tt.want), "Authenticate(%s)", tt.name)
		})
	}
}

func TestAuthenticateRejects(t *testing.T) {
	t.Parallel()
	key := newRSAKey(t, "rsa-1")
	srv := newJWKSServer(t, key)
	cfg := urlConfig(srv.URL)
	cfg.Audience = testAudience
	v := newVerifier(t, cfg)
	now := time.Now()

	tests := []struct {
		name    string
		changes map[string]any
		want    string
	}{
		{"expired", map[string]any{"exp": now.Add(-time.Minute).Unix()}, "token is expired"},
		{"not yet valid", map[string]any{"nbf": now.Add(time.Minute).Unix()}, "token is not valid yet"},
		{"issued in the future", map[string]any{"iat": now.Add(time.Hour).Unix()}, "token was issued in the future"},
		{"missing exp", map[string]any{"exp": nil}, "token has no expiry"},
		{"exp a string", map[string]any{"exp": "tomorrow"}, "claim exp: expected a number"},
		{"exp out of range", map[string]any{"exp": 1e300}, "claim exp: out of range"},
		{"wrong issuer", map[string]any{"iss": "https://evil.example.test"}, "token issuer is not accepted"},
		{"missing issuer", map[string]any{"iss": nil}, "token has no issuer"},
		{"issuer a number", map[string]any{"iss": 7}, "claim iss: expected a string"},
		{"wrong audience", map[string]any{"aud": []any{"account"}}, "token audience is not accepted"},
		{"missing audience", map[string]any{"aud": nil}, "token audience is not accepted"},
		{"audience an object", map[string]any{"aud": map[string]any{}}, "claim aud: expected an array of strings"},
		{"org_id a number", map[string]any{"org_id": 42}, "claim org_id: expected a string"},
		{"username an object", map[string]any{"username": map[string]any{"a": 1}}, "claim username: expected a string"},
		{"roles a string", map[string]any{"realm_access": map[string]any{"roles": "admin"}},
			"claim realm_access.roles: expected an array of strings"},
		{"roles with a number", map[string]any{"realm_access": map[string]any{"roles": []any{"a", 1}}},
			"claim realm_access.roles: expected an array of strings"},
		{"realm_access a string", map[string]any{"realm_access": "admin"},
			"claim realm_access.roles: realm_access is not an object"},
		{"sub a number", map[string]any{"sub": 12}, "claim sub: expected a string"},
		{"clientId an array", map[string]any{"clientId": []any{"x"}}, "claim clientId: expected a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token := key.sign(t, with(validClaims(), tt.changes))
			_, err := v.Authenticate(context.Background(), token)
			checkUnauthenticated(t, "Authenticate("+tt.name+")", token, err, tt.want)
		})
	}
}

func TestAuthenticateRefusesForgedAlgorithms(t *testing.T) {
	t.Parallel()
	key := newRSAKey(t, "rsa-1")
	srv := newJWKSServer(t, key)
	v := newVerifier(t, urlConfig(srv.URL))

	none := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims())
	none.Header["kid"] = key.kid
	noneToken, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatalf("SignedString(none) = %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(key.signer.Public())
	if err != nil {
		t.Fatalf("MarshalPKIXPublicKey() = %v", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
	hs.Header["kid"] = key.kid
	hsToken, err := hs.SignedString(pubPEM)
	if err != nil {
		t.Fatalf("SignedString(HS256) = %v", err)
	}
	valid := key.sign(t, validClaims())
	parts := strings.Split(valid, ".")
	otherKey := newRSAKey(t, key.kid)
	resigned := otherKey.sign(t, validClaims())

	tests := []struct {
		name, token, want string
	}{
		{"alg none", noneToken, "token signing algorithm is not accepted"},
		{"HS256 with the public key as secret", hsToken, "token signing algorithm is not accepted"},
		{"signature stripped", parts[0] + "." + parts[1] + ".", "token signature is invalid"},
		{"signed by another key with the same kid", resigned, "token signature is invalid"},
		{"no kid", jwtWithoutKID(t, key), "token has no key id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.Authenticate(context.Background(), tt.token)
			checkUnauthenticated(t, "Authenticate("+tt.name+")", tt.token, err, tt.want)
		})
	}
}

func jwtWithoutKID(t *testing.T, key testKey) string {
	t.Helper()
	s, err := jwt.NewWithClaims(key.method, validClaims()).SignedString(key.signer)
	if err != nil {
		t.Fatalf("SignedString() = %v", err)
	}
	return s
}

func TestAuthenticateGarbage(t *testing.T) {
	t.Parallel()
	key := newRSAKey(t, "rsa-1")
	srv := newJWKSServer(t, key)
	v := newVerifier(t, urlConfig(srv.URL))
	random := make([]byte, 300)
	if _, err := rand.Read(random); err != nil {
		t.Fatalf("rand.Read() = %v", err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	tests := []string{
		"",
		"a.b.c",
		"...",
		"Bearer " + key.sign(t, validClaims()),
		b64(random),
		b64(random[:100]) + "." + b64(random[100:200]) + "." + b64(random[200:]),
		b64([]byte(`{"alg":"RS256","kid":"rsa-1"}`)) + "." + b64([]byte(`[1,2]`)) + ".c2ln",
		b64([]byte(`null`)) + "." + b64([]byte(`null`)) + ".c2ln",
		b64([]byte(`{"alg":42}`)) + "." + b64([]byte(`{}`)) + ".c2ln",
		b64([]byte(`{"alg":"RS256","kid":{"a":1}}`)) + "." + b64([]byte(`{}`)) + ".c2ln",
		strings.Repeat("A", 70<<10),
	}
	for i, token := range tests {
		_, err := v.Authenticate(context.Background(), token)
		if err == nil || fleet.ErrorCodeOf(err) != fleet.CodeUnauthenticated {
			t.Errorf("Authenticate(garbage #%d) = %v, want an unauthenticated error", i, err)
		}
	}
}
