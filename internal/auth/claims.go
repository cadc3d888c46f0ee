package auth

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// maxNumericDate is 9999-12-31T23:59:59Z; later dates are refused rather than
// risk overflowing time arithmetic.
const maxNumericDate = 253402300799

// unauthenticated returns the error of every verification failure: code
// CodeUnauthenticated, a message safe to show, and cause (never shown) for logs.
func unauthenticated(cause error, format string, args ...any) *fleet.Error {
	e := fleet.Errorf(fleet.CodeUnauthenticated, format, args...)
	if cause != nil {
		e.Err = cause
	}
	return e
}

// lookupClaim returns the value at the dotted path name and whether it is
// present (JSON null counts as absent). A top-level key equal to the whole
// name wins, so URL-shaped claim names that contain dots still work.
func lookupClaim(claims map[string]any, name string) (any, bool, error) {
	if v, ok := claims[name]; ok {
		return v, v != nil, nil
	}
	segments := strings.Split(name, ".")
	var cur any = claims
	for i, seg := range segments {
		obj, ok := cur.(map[string]any)
		if !ok {
			parent := strings.Join(segments[:i], ".")
			return nil, false, unauthenticated(nil, "claim %s: %s is not an object", name, parent)
		}
		if cur, ok = obj[seg]; !ok || cur == nil {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// stringClaim returns the string at name; present values of another type are an error.
func stringClaim(claims map[string]any, name string) (string, bool, error) {
	v, ok, err := lookupClaim(claims, name)
	if err != nil || !ok {
		return "", false, err
	}
	s, isString := v.(string)
	if !isString {
		return "", false, unauthenticated(nil, "claim %s: expected a string", name)
	}
	return s, true, nil
}

// firstStringClaim returns the string of the first claim of names that is present.
func firstStringClaim(claims map[string]any, names []string) (string, error) {
	for _, name := range names {
		s, ok, err := stringClaim(claims, name)
		if err != nil || ok {
			return s, err
		}
	}
	return "", nil
}

// stringsClaim returns the array of strings at name; a missing claim is empty.
func stringsClaim(claims map[string]any, name string) ([]string, error) {
	v, ok, err := lookupClaim(claims, name)
	if err != nil || !ok {
		return nil, err
	}
	list, isList := v.([]any)
	if !isList {
		return nil, unauthenticated(nil, "claim %s: expected an array of strings", name)
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, isString := item.(string)
		if !isString {
			return nil, unauthenticated(nil, "claim %s: expected an array of strings", name)
		}
		out = append(out, s)
	}
	return out, nil
}

// audienceClaim returns "aud", which RFC 7519 allows as a string or an array of strings.
func audienceClaim(claims map[string]any) ([]string, error) {
	if s, isString := claims["aud"].(string); isString {
		return []string{s}, nil
	}
	return stringsClaim(claims, "aud")
}

// timeClaim returns the NumericDate at the top-level claim name.
func timeClaim(claims map[string]any, name string) (time.Time, bool, error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return time.Time{}, false, nil
	}
	var secs float64
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return time.Time{}, false, unauthenticated(err, "claim %s: expected a number", name)
		}
		secs = f
	case float64:
		secs = n
	default:
		return time.Time{}, false, unauthenticated(nil, "claim %s: expected a number", name)
	}
	if math.IsNaN(secs) || secs < 0 || secs > maxNumericDate {
		return time.Time{}, false, unauthenticated(nil, "claim %s: out of range", name)
	}
	whole, frac := math.Modf(secs)
	return time.Unix(int64(whole), int64(frac*1e9)), true, nil
}

// checkTimes applies exp (required), nbf and iat with the configured leeway.
func (v *Verifier) checkTimes(claims map[string]any, now time.Time) error {
	skew := v.cfg.ClockSkew
	exp, ok, err := timeClaim(claims, "exp")
	if err != nil {
		return err
	}
	if !ok {
		return unauthenticated(nil, "token has no expiry")
	}
	if !now.Before(exp.Add(skew)) {
		return unauthenticated(nil, "token is expired")
	}
	nbf, ok, err := timeClaim(claims, "nbf")
	if err != nil {
		return err
	}
	if ok && now.Add(skew).Before(nbf) {
		return unauthenticated(nil, "token is not valid yet")
	}
	iat, ok, err := timeClaim(claims, "iat")
	if err != nil {
		return err
	}
	if ok && now.Add(skew).Before(iat) {
		return unauthenticated(nil, "token was issued in the future")
	}
	return nil
}

// checkIssuerAudience checks "iss" against the accepted issuers and, when an
// audience is configured, that "aud" names it.
func (v *Verifier) checkIssuerAudience(claims map[string]any) error {
	iss, ok, err := stringClaim(claims, "iss")
	if err != nil {
		return err
	}
	if !ok {
		return unauthenticated(nil, "token has no issuer")
	}
	if !v.issuers[iss] {
		return unauthenticated(nil, "token issuer is not accepted")
	}
	if v.cfg.Audience == "" {
		return nil
	}
	aud, err := audienceClaim(claims)
	if err != nil {
		return err
	}
	if !slices.Contains(aud, v.cfg.Audience) {
		return unauthenticated(nil, "token audience is not accepted")
	}
	return nil
}

// identity reads the configured claims into an identity.
func (v *Verifier) identity(claims map[string]any) (fleet.Identity, error) {
	var id fleet.Identity
	var err error
	if id.Subject, _, err = stringClaim(claims, "sub"); err != nil {
		return fleet.Identity{}, err
	}
	if id.Issuer, _, err = stringClaim(claims, "iss"); err != nil {
		return fleet.Identity{}, err
	}
	if id.OrgID, _, err = stringClaim(claims, v.cfg.OrgClaim); err != nil {
		return fleet.Identity{}, err
	}
	if id.Username, err = firstStringClaim(claims, v.cfg.UsernameClaims); err != nil {
		return fleet.Identity{}, err
	}
	if id.Roles, err = stringsClaim(claims, v.cfg.RolesClaim); err != nil {
		return fleet.Identity{}, err
	}
	if id.AgentID, err = firstStringClaim(claims, v.cfg.AgentClaims); err != nil {
		return fleet.Identity{}, err
	}
	return id, nil
}
