package fleet

import (
	"context"
	"slices"
	"time"
)

// Identity is who a request comes from, as read from its verified token. Which
// token claims fill which field is configuration of the auth package.
type Identity struct {
	// Subject is the token's "sub" claim.
	Subject string
	// Issuer is the token's "iss" claim.
	Issuer string
	// OrgID is the organisation the caller acts for; public queries are scoped to it.
	OrgID string
	// Username is the caller's user name.
	Username string
	// Roles are the caller's roles, used for admin endpoints.
	Roles []string
	// AgentID is the agent identity claim, set for fleetshard-sync agents.
	AgentID string
}

// HasRole reports whether the identity carries role.
func (i Identity) HasRole(role string) bool { return slices.Contains(i.Roles, role) }

// Authenticator verifies a bearer token and returns the identity it carries.
type Authenticator interface {
	// Authenticate returns the identity of a valid token, or an error with
	// CodeUnauthenticated when the token is invalid for any reason.
	Authenticate(ctx context.Context, rawToken string) (Identity, error)
}

type identityKey struct{}

// NewContextWithIdentity returns a copy of ctx that carries id.
func NewContextWithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFromContext returns the identity ctx carries, if any.
func IdentityFromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Clock tells the time; reconcilers and services take one so tests control time.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }
