package cli

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// errTokenExpired is the answer for an expired token that cannot be renewed.
var errTokenExpired = errors.New("the access token has expired and cannot be refreshed: run `fleetctl login` again")

// tokenSource returns where the bearer tokens of cfg come from: the token
// itself, the refresh_token grant (an offline token) or the client
// credentials grant, each renewing the token when it expires. Every new token
// is passed to save, so the next command reuses it.
func tokenSource(ctx context.Context, cfg *Config, client *http.Client, save func(*oauth2.Token) error) oauth2.TokenSource {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	cached := &oauth2.Token{AccessToken: cfg.AccessToken, Expiry: cfg.Expiry, RefreshToken: cfg.RefreshToken, TokenType: "Bearer"}
	if cached.AccessToken == "" {
		cached = nil
	}
	var src oauth2.TokenSource
	switch {
	case cfg.TokenURL == "":
		return staticSource{cached}
	case cfg.RefreshToken != "":
		oc := &oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Scopes: cfg.Scopes,
			Endpoint: oauth2.Endpoint{TokenURL: cfg.TokenURL}}
		if cached == nil {
			cached = &oauth2.Token{RefreshToken: cfg.RefreshToken}
		}
		src = oc.TokenSource(ctx, cached)
	default:
		cc := &clientcredentials.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, TokenURL: cfg.TokenURL, Scopes: cfg.Scopes}
		if cfg.Audience != "" {
			cc.EndpointParams = url.Values{"audience": {cfg.Audience}}
		}
		src = oauth2.ReuseTokenSource(cached, cc.TokenSource(ctx))
	}
	last := ""
	if cached != nil {
		last = cached.AccessToken
	}
	return &savingSource{src: src, save: save, last: last}
}

// staticSource serves a token given with --token until it expires.
type staticSource struct{ tok *oauth2.Token }

// Token returns the token, or errTokenExpired once it has expired.
func (s staticSource) Token() (*oauth2.Token, error) {
	if s.tok == nil || !s.tok.Valid() {
		return nil, errTokenExpired
	}
	return s.tok, nil
}

// savingSource passes each new token of src to save.
type savingSource struct {
	mu   sync.Mutex
	src  oauth2.TokenSource
	save func(*oauth2.Token) error
	last string
}

// Token returns src's token, saving it first when it is a new one.
func (s *savingSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, err := s.src.Token()
	if err != nil {
		return nil, err
	}
	if tok.AccessToken != s.last {
		if err := s.save(tok); err != nil {
			return nil, err
		}
		s.last = tok.AccessToken
	}
	return tok, nil
}

// jwtExpiry reads the exp claim of a JWT without checking its signature
// (the server does): it only tells when a --token will stop working. The
// zero time when the token is not a JWT or has no exp.
func jwtExpiry(token string) time.Time {
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil || claims.ExpiresAt == nil {
		return time.Time{}
	}
	return claims.ExpiresAt.Time
}
