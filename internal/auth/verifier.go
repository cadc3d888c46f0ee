package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/MicahParks/keyfunc"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/golang-jwt/jwt/v4"
)

// maxTokenBytes bounds the tokens parsed; real tokens are a few kilobytes.
const maxTokenBytes = 64 << 10

// allowedAlgorithms returns the asymmetric signing algorithms accepted. Leaving
// out "none" and the HMAC family refuses tokens signed with a public key as secret.
func allowedAlgorithms() []string {
	return []string{
		"RS256", "RS384", "RS512",
		"PS256", "PS384", "PS512",
		"ES256", "ES384", "ES512",
	}
}

// Verifier verifies bearer tokens against the configured keys and claims. It
// implements fleet.Authenticator and is safe for concurrent use.
type Verifier struct {
	cfg     Config
	logger  *slog.Logger
	issuers map[string]bool
	parser  *jwt.Parser
	// static holds the keys of the JWKS file and of the development key,
	// looked up before the remote JWKS.
	static []*keyfunc.JWKS
	remote *keyfunc.JWKS
	stop   func() bool
}

var _ fleet.Authenticator = (*Verifier)(nil)

// NewVerifier validates cfg, loads the file and development keys and fetches
// the remote JWKS once. The remote JWKS is then refreshed in the background
// until ctx is done or Close is called. client fetches the JWKS; nil means
// http.DefaultClient. logger receives refresh failures; nil discards them.
func NewVerifier(ctx context.Context, cfg Config, logger *slog.Logger, client *http.Client) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("NewVerifier: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("NewVerifier: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if client == nil {
		client = http.DefaultClient
	}
	v := &Verifier{
		cfg:     cfg,
		logger:  logger,
		issuers: acceptedIssuers(cfg),
		parser: jwt.NewParser(jwt.WithValidMethods(allowedAlgorithms()), jwt.WithJSONNumber(),
			jwt.WithoutClaimsValidation()),
	}
	if err := v.loadStatic(); err != nil {
		return nil, fmt.Errorf("NewVerifier: %w", err)
	}
	if cfg.JWKSURL != "" {
		if err := v.loadRemote(client); err != nil {
			return nil, fmt.Errorf("NewVerifier: %w", err)
		}
		v.stop = context.AfterFunc(ctx, v.remote.EndBackground)
	}
	return v, nil
}

// acceptedIssuers returns the configured issuers, plus DevIssuer when the
// development key is trusted.
func acceptedIssuers(cfg Config) map[string]bool {
	issuers := make(map[string]bool, len(cfg.Issuers)+1)
	for _, iss := range cfg.Issuers {
		issuers[iss] = true
	}
	if cfg.DevKeyDir != "" {
		issuers[cfg.DevIssuer] = true
	}
	return issuers
}

// loadStatic reads the JWKS file and the development key, when configured.
func (v *Verifier) loadStatic() error {
	if v.cfg.JWKSFile != "" {
		raw, err := os.ReadFile(v.cfg.JWKSFile)
		if err != nil {
			return fmt.Errorf("reading --auth-jwks-file: %w", err)
		}
		jwks, err := parseSigningJWKS(raw)
		if err != nil {
			return fmt.Errorf("parsing --auth-jwks-file %s: %w", v.cfg.JWKSFile, err)
		}
		v.static = append(v.static, jwks)
	}
	if v.cfg.DevKeyDir != "" {
		key, err := EnsureDevKey(v.cfg.DevKeyDir)
		if err != nil {
			return err
		}
		pub := keyfunc.NewGivenRSACustomWithOptions(&key.PrivateKey.PublicKey,
			keyfunc.GivenKeyOptions{Algorithm: "RS256"})
		v.static = append(v.static, keyfunc.NewGiven(map[string]keyfunc.GivenKey{key.KID: pub}))
		v.logger.Warn("auth: trusting the development signing key", "dir", v.cfg.DevKeyDir, "kid", key.KID)
	}
	return nil
}

// parseSigningJWKS parses a JWKS, keeping only keys meant for signatures, as
// keyfunc does for remote sets but not for NewJSON.
func parseSigningJWKS(raw []byte) (*keyfunc.JWKS, error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	set.Keys = slices.DeleteFunc(set.Keys, func(k map[string]any) bool {
		use, _ := k["use"].(string)
		return use != "" && use != "sig"
	})
	filtered, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	jwks, err := keyfunc.NewJSON(filtered)
	if err != nil {
		return nil, err
	}
	if jwks.Len() == 0 {
		return nil, errors.New("no usable signing key")
	}
	return jwks, nil
}

// loadRemote fetches the JWKS URL and starts its background refresh.
func (v *Verifier) loadRemote(client *http.Client) error {
	url := v.cfg.JWKSURL
	jwks, err := keyfunc.Get(url, keyfunc.Options{
		Client:            client,
		RefreshInterval:   v.cfg.JWKSRefreshInterval,
		RefreshRateLimit:  v.cfg.JWKSRefreshRateLimit,
		RefreshTimeout:    v.cfg.JWKSRequestTimeout,
		RefreshUnknownKID: true,
		RefreshErrorHandler: func(err error) {
			v.logger.Error("auth: refreshing the JWKS failed", "url", url, "error", err)
		},
	})
	if err != nil {
		return fmt.Errorf("fetching JWKS %s: %w", url, err)
	}
	v.remote = jwks
	return nil
}

// Close ends the background refresh of the remote JWKS. It is safe to call more than once.
func (v *Verifier) Close() {
	if v.stop != nil {
		v.stop()
	}
	if v.remote != nil {
		v.remote.EndBackground()
	}
}

// Authenticate verifies rawToken's signature, expiry, issuer and audience and
// returns the identity its claims carry. Every failure is an error with code
// fleet.CodeUnauthenticated and a message that never contains the token. ctx
// is not consulted: a refresh of the JWKS is bounded by JWKSRequestTimeout.
func (v *Verifier) Authenticate(ctx context.Context, rawToken string) (fleet.Identity, error) {
	if len(rawToken) > maxTokenBytes {
		return fleet.Identity{}, unauthenticated(nil, "token is too large")
	}
	claims := jwt.MapClaims{}
	token, err := v.parser.ParseWithClaims(rawToken, claims, v.keyFor)
	if err != nil {
		return fleet.Identity{}, parseError(token, err)
	}
	if err := v.checkTimes(claims, time.Now()); err != nil {
		return fleet.Identity{}, err
	}
	if err := v.checkIssuerAudience(claims); err != nil {
		return fleet.Identity{}, err
	}
	return v.identity(claims)
}

// keyFor returns the public key named by the token's kid: from the file and
// development keys first, then from the remote JWKS, which refreshes itself
// (rate-limited) when it does not know the kid.
func (v *Verifier) keyFor(token *jwt.Token) (any, error) {
	if kid, ok := token.Header["kid"].(string); !ok || kid == "" {
		return nil, unauthenticated(nil, "token has no key id")
	}
	sources := v.static
	if v.remote != nil {
		sources = append(slices.Clip(sources), v.remote)
	}
	for _, jwks := range sources {
		key, err := jwks.Keyfunc(token)
		if errors.Is(err, keyfunc.ErrKIDNotFound) {
			continue
		}
		if err != nil {
			return nil, unauthenticated(err, "token signing key does not fit the token")
		}
		// A JWKS whose refresh was ended answers a nil key without error.
		if key != nil {
			return key, nil
		}
	}
	return nil, unauthenticated(nil, "token signing key is not known")
}

// parseError turns an error of the JWT parser into an unauthenticated error.
func parseError(token *jwt.Token, err error) error {
	var fe *fleet.Error
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthenticated(err, "token is malformed")
	case token == nil || token.Method == nil || !slices.Contains(allowedAlgorithms(), token.Method.Alg()):
		return unauthenticated(err, "token signing algorithm is not accepted")
	default:
		return unauthenticated(err, "token signature is invalid")
	}
}
