package hydratest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/MicahParks/keyfunc"
	"github.com/golang-jwt/jwt/v4"

	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

func TestMain(m *testing.M) { hydratest.Main(m) }

func TestStartIsShared(t *testing.T) {
	if a, b := hydratest.Start(t), hydratest.Start(t); a != b {
		t.Errorf("Start() = %p, then %p, want the same Hydra", a, b)
	}
}

func TestClientCredentialsTokenVerifiesAgainstJWKS(t *testing.T) {
	t.Parallel()
	issuer := hydratest.Start(t)
	const clientID, secret, audience = "fleet-agent-test", "a-secret-of-some-length", "fleet-manager"
	issuer.CreateClient(t, clientID, secret, audience, "fleet:read", "fleet:write")

	raw := issuer.Token(t, clientID, secret, audience)

	jwks, err := keyfunc.Get(issuer.JWKSURL(), keyfunc.Options{})
	if err != nil {
		t.Fatalf("keyfunc.Get(%s) error = %v", issuer.JWKSURL(), err)
	}
	defer jwks.EndBackground()
	claims := jwt.MapClaims{}
	token, err := jwt.ParseWithClaims(raw, claims, jwks.Keyfunc, jwt.WithValidMethods([]string{"RS256"}))
	if err != nil || !token.Valid {
		t.Fatalf("jwt.ParseWithClaims(token) = valid %v, error %v", token != nil && token.Valid, err)
	}
	if got := claims["iss"]; got != issuer.Issuer() {
		t.Errorf("iss = %v, want %s", got, issuer.Issuer())
	}
	if got := claims["sub"]; got != clientID {
		t.Errorf("sub = %v, want %s", got, clientID)
	}
	if !claims.VerifyAudience(audience, true) {
		t.Errorf("aud = %v, want it to hold %s", claims["aud"], audience)
	}
	if kid, _ := token.Header["kid"].(string); kid == "" {
		t.Errorf("token header kid = %v, want a key id", token.Header["kid"])
	}
	var scopes []string
	if scp, ok := claims["scp"].([]any); ok {
		for _, s := range scp {
			scopes = append(scopes, s.(string))
		}
	}
	for _, want := range []string{"fleet:read", "fleet:write"} {
		if !slices.Contains(scopes, want) {
			t.Errorf("scp = %v, want it to hold %s", claims["scp"], want)
		}
	}

	// A token whose payload was changed no longer verifies.
	parts := strings.Split(raw, ".")
	tampered := parts[0] + "." + strings.Repeat("A", len(parts[1])) + "." + parts[2]
	if _, err := jwt.Parse(tampered, jwks.Keyfunc, jwt.WithValidMethods([]string{"RS256"})); err == nil {
		t.Error("jwt.Parse(tampered token) error = nil, want a signature error")
	}
}

func TestEndpointsDeriveFromTheIssuer(t *testing.T) {
	t.Parallel()
	issuer := hydratest.Start(t)
	base := strings.TrimSuffix(issuer.Issuer(), "/")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("Issuer() = %s, want http://127.0.0.1:<port>", issuer.Issuer())
	}
	for name, got := range map[string]string{"JWKSURL": issuer.JWKSURL(), "TokenURL": issuer.TokenURL()} {
		if !strings.HasPrefix(got, base+"/") {
			t.Errorf("%s() = %s, want it under %s", name, got, base)
		}
	}
}
