package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// tokenEarlyExpiry is how long before its expiry an OIDC token is replaced,
// so that no request leaves with a token about to expire.
const tokenEarlyExpiry = 30 * time.Second

// NewTokenSource returns the bearer tokens for the fleet manager: the token
// file's content, re-read whenever the file changes, or OIDC client-credentials
// tokens, fetched with tokenClient and replaced before they expire.
func NewTokenSource(cfg Config, tokenClient *http.Client) oauth2.TokenSource {
	if cfg.TokenFile != "" {
		return config.NewFileTokenSource(cfg.TokenFile)
	}
	return oauth2.ReuseTokenSourceWithExpiry(nil, &clientCredentialsSource{cfg: cfg, client: tokenClient}, tokenEarlyExpiry)
}

// clientCredentialsSource fetches a new token with the client-credentials
// grant. It reads the client secret at each fetch, so a rotated secret is
// used from the next token on.
type clientCredentialsSource struct {
	cfg    Config
	client *http.Client
}

// Token fetches a new token.
func (s *clientCredentialsSource) Token() (*oauth2.Token, error) {
	b, err := os.ReadFile(s.cfg.OIDCClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("OIDC client secret: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return nil, errors.New("OIDC client secret: " + s.cfg.OIDCClientSecretFile + " is empty")
	}
	cc := clientcredentials.Config{
		ClientID: s.cfg.OIDCClientID, ClientSecret: secret, TokenURL: s.cfg.OIDCTokenURL, Scopes: s.cfg.OIDCScopes,
	}
	if s.cfg.OIDCAudience != "" {
		cc.EndpointParams = url.Values{"audience": {s.cfg.OIDCAudience}}
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, s.client)
	tok, err := cc.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("OIDC client credentials from %s: %w", s.cfg.OIDCTokenURL, err)
	}
	return tok, nil
}
