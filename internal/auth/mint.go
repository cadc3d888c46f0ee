package auth

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// TokenRequest describes a development token to mint.
type TokenRequest struct {
	// OrgID is the organisation id, placed at the first org claim path.
	OrgID string
	// Username is the user name and the subject, when set.
	Username string
	// Roles are placed at the roles claim path.
	Roles []string
	// AgentID is the agent id, and the subject when Username is empty.
	AgentID string
	// TTL is how long the token is valid from now.
	TTL time.Duration
	// Issuer defaults to Config.DevIssuer.
	Issuer string
	// Audience defaults to Config.Audience; empty leaves "aud" out.
	Audience string
}

// Mint signs a development token (RS256, with kid) carrying req's identity at
// the first claim path cfg configures for each field, so that a Verifier of
// the same cfg accepts it. now is the token's iat and nbf.
func (k *DevKey) Mint(cfg Config, req TokenRequest, now time.Time) (string, error) {
	claims, err := mintClaims(cfg, req, now)
	if err != nil {
		return "", fmt.Errorf("Mint: %w", err)
	}
	token := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	token.Header["kid"] = k.KID
	signed, err := token.SignedString(k.PrivateKey)
	if err != nil {
		return "", fmt.Errorf("Mint: %w", err)
	}
	return signed, nil
}

// mintClaims builds the registered claims and places the identity claims.
func mintClaims(cfg Config, req TokenRequest, now time.Time) (jwt.MapClaims, error) {
	if req.TTL <= 0 {
		return nil, errors.New("TTL must be positive")
	}
	sub := req.Username
	if sub == "" {
		sub = req.AgentID
	}
	if sub == "" {
		return nil, errors.New("a username or an agent id is required")
	}
	issuer := firstNonEmpty(req.Issuer, cfg.DevIssuer)
	if issuer == "" {
		return nil, errors.New("an issuer is required")
	}
	claims := jwt.MapClaims{
		"sub": sub,
		"iss": issuer,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(req.TTL).Unix(),
	}
	if aud := firstNonEmpty(req.Audience, cfg.Audience); aud != "" {
		claims["aud"] = aud
	}
	if err := placeIdentity(claims, cfg, req); err != nil {
		return nil, err
	}
	return claims, nil
}

// placeIdentity sets the non-empty identity fields of req at their claim paths.
func placeIdentity(claims jwt.MapClaims, cfg Config, req TokenRequest) error {
	var errs []error
	if req.OrgID != "" {
		errs = append(errs, setClaim(claims, cfg.OrgClaim, req.OrgID))
	}
	if req.Username != "" {
		errs = append(errs, setClaim(claims, firstOf(cfg.UsernameClaims), req.Username))
	}
	if len(req.Roles) > 0 {
		errs = append(errs, setClaim(claims, cfg.RolesClaim, req.Roles))
	}
	if req.AgentID != "" {
		errs = append(errs, setClaim(claims, firstOf(cfg.AgentClaims), req.AgentID))
	}
	return errors.Join(errs...)
}

// setClaim places value at the dotted path name, creating nested objects. It
// refuses to overwrite a different value, e.g. when two paths collide.
func setClaim(claims map[string]any, name string, value any) error {
	segments := strings.Split(name, ".")
	obj := claims
	for _, seg := range segments[:len(segments)-1] {
		if seg == "" {
			return fmt.Errorf("claim %q: empty path segment", name)
		}
		next, ok := obj[seg]
		if !ok {
			child := map[string]any{}
			obj[seg], obj = child, child
			continue
		}
		if obj, ok = next.(map[string]any); !ok {
			return fmt.Errorf("claim %q: %s is already set to a non-object", name, seg)
		}
	}
	last := segments[len(segments)-1]
	if last == "" {
		return fmt.Errorf("claim %q: empty path segment", name)
	}
	if old, ok := obj[last]; ok && !reflect.DeepEqual(old, value) {
		return fmt.Errorf("claim %q is already set to another value", name)
	}
	obj[last] = value
	return nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstOf(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
