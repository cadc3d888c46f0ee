package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/golang-jwt/jwt/v4"
)

const (
	testIssuer   = "https://sso.example.test/realms/fleet"
	testAudience = "fleet-manager"
)

// testKey is a signing key of a test identity provider.
type testKey struct {
	kid    string
	signer crypto.Signer
	method jwt.SigningMethod
}

func newRSAKey(t *testing.T, kid string) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("rsa.GenerateKey() = %v", err)
	}
	return testKey{kid: kid, signer: k, method: jwt.SigningMethodRS256}
}

func newECKey(t *testing.T, kid string) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("ecdsa.GenerateKey() = %v", err)
	}
	return testKey{kid: kid, signer: k, method: jwt.SigningMethodES256}
}

// jwk encodes the public half of k, written independently of the package's own encoder.
func (k testKey) jwk(t *testing.T) map[string]string {
	t.Helper()
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	switch pub := k.signer.Public().(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": k.kid, "use": "sig",
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
	case *ecdsa.PublicKey:
		// The uncompressed point: 0x04, then X and Y, each of the curve's size.
		raw, err := pub.Bytes()
		if err != nil {
			t.Fatalf("jwk(%s): %v", k.kid, err)
		}
		size := (len(raw) - 1) / 2
		return map[string]string{"kty": "EC", "kid": k.kid, "use": "sig", "crv": "P-256",
			"x": b64(raw[1 : 1+size]), "y": b64(raw[1+size:])}
	}
	t.Fatalf("jwk(%s): unsupported key type %T", k.kid, k.signer)
	return nil
}

func jwksJSON(t *testing.T, keys ...testKey) []byte {
	t.Helper()
	set := map[string][]map[string]string{"keys": {}}
	for _, k := range keys {
		set["keys"] = append(set["keys"], k.jwk(t))
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatalf("json.Marshal(jwks) = %v", err)
	}
	return b
}

// sign returns a token of claims signed by k, with k's kid in the header.
func (k testKey) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	token := jwt.NewWithClaims(k.method, claims)
	token.Header["kid"] = k.kid
	s, err := token.SignedString(k.signer)
	if err != nil {
		t.Fatalf("SignedString() = %v", err)
	}
	return s
}

// jwksServer serves a JWKS that a test may replace, counting the requests.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64
	body atomic.Pointer[[]byte]
}

func newJWKSServer(t *testing.T, keys ...testKey) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.serve(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(t *testing.T, keys ...testKey) {
	body := jwksJSON(t, keys...)
	s.body.Store(&body)
}

// urlConfig is the default configuration trusting the JWKS at url.
func urlConfig(url string) auth.Config {
	cfg := auth.DefaultConfig()
	cfg.JWKSURL = url
	cfg.Issuers = []string{testIssuer}
	return cfg
}

func newVerifier(t *testing.T, cfg auth.Config) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatalf("NewVerifier() = %v", err)
	}
	t.Cleanup(v.Close)
	return v
}

// validClaims are the claims of a valid Keycloak-shaped user token.
func validClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss":          testIssuer,
		"sub":          "f:1234:alice",
		"aud":          []any{testAudience, "account"},
		"iat":          now.Unix(),
		"nbf":          now.Unix(),
		"exp":          now.Add(5 * time.Minute).Unix(),
		"org_id":       "org-1",
		"username":     "alice",
		"realm_access": map[string]any{"roles": []any{"fleet-admin", "user"}},
	}
}

// with returns a copy of c with changes applied; a nil value deletes the claim.
func with(c jwt.MapClaims, changes map[string]any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// checkUnauthenticated fails unless err is an unauthenticated error whose
// message contains want and not the token.
func checkUnauthenticated(t *testing.T, call string, token string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s = nil error, want %q", call, want)
	}
	if got := fleet.ErrorCodeOf(err); got != fleet.CodeUnauthenticated {
		t.Errorf("ErrorCodeOf(%s) = %v (%v), want %v", call, got, err, fleet.CodeUnauthenticated)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%s = %q, want it to contain %q", call, err, want)
	}
	if len(token) > 8 && strings.Contains(err.Error(), token) {
		t.Errorf("%s = %q, which contains the token", call, err)
	}
}
