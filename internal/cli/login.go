package cli

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/version"
)

// loginFlags are the flags of `fleetctl login`.
type loginFlags struct {
	url, token, offlineToken, tokenURL, clientID, clientSecret, audience string
	scopes                                                               []string
	insecure, insecureHTTP                                               bool
}

// config returns the config the flags describe, or a usage error.
func (lf *loginFlags) config() (*Config, error) {
	base, err := normalizeURL(lf.url)
	if err != nil {
		return nil, err
	}
	cfg := &Config{URL: base, Insecure: lf.insecure, InsecureHTTP: lf.insecureHTTP}
	usage := func(msg string) error { return &exitError{code: ExitLocal, msg: msg} }
	switch {
	case lf.token != "":
		if lf.offlineToken != "" || lf.clientSecret != "" || lf.tokenURL != "" {
			return nil, usage("--token is a login of its own: give it without --offline-token, --token-url or --client-secret")
		}
		cfg.AccessToken, cfg.Expiry = lf.token, jwtExpiry(lf.token)
	case lf.offlineToken != "":
		if lf.tokenURL == "" || lf.clientID == "" {
			return nil, usage("--offline-token needs --token-url and --client-id")
		}
		cfg.RefreshToken = lf.offlineToken
	case lf.clientSecret != "":
		if lf.tokenURL == "" || lf.clientID == "" {
			return nil, usage("--client-secret needs --token-url and --client-id")
		}
	default:
		return nil, usage("login needs --token, --offline-token (with --token-url and --client-id), or --client-id and --client-secret with --token-url")
	}
	if lf.tokenURL != "" {
		cfg.TokenURL, cfg.ClientID, cfg.ClientSecret = lf.tokenURL, lf.clientID, lf.clientSecret
		cfg.Scopes, cfg.Audience = lf.scopes, lf.audience
	}
	return cfg, nil
}

func (a *app) loginCommand() *cobra.Command {
	var lf loginFlags
	cmd := &cobra.Command{
		Use:   "login --url URL (--token T | --offline-token T --token-url U --client-id ID | --client-id ID --client-secret S --token-url U)",
		Short: "Log in to a Fleet Manager and keep the credentials in the config file",
		Long: `Log in to a Fleet Manager. One of three ways:

  --token T                     a bearer token, used until it expires
  --offline-token T             an offline or refresh token, exchanged at --token-url
                                (refresh_token grant, --client-id, --client-secret if confidential)
  --client-id ID --client-secret S
                                OIDC client credentials, exchanged at --token-url

The login is checked with GET /current_user, then written to the config file
(mode 0600). Tokens are renewed when they expire.

Credentials go over plain HTTP only to loopback (127.0.0.0/8, ::1, localhost):
an http:// --url or --token-url of another host is refused, as anyone on the
way could read the token, unless --insecure-http is given (it is kept with the
login).`,
		Example: `  fleetctl login --url http://localhost:8000 --token "$(bin/fleet-manager token --org=org-1 --user=alice)"
  fleetctl login --url https://fleet.example.com --token-url https://sso.example.com/token --client-id fleetctl --offline-token "$OFFLINE"
  fleetctl login --url https://fleet.example.com --token-url https://sso.example.com/token --client-id my-sa --client-secret "$SECRET"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := lf.config()
			if err != nil {
				return err
			}
			if err := a.connectWith(cmd.Context(), cfg, false); err != nil {
				return err
			}
			me, err := a.currentUser(cmd.Context())
			if err != nil {
				return err
			}
			path, err := a.configPath()
			if err != nil {
				return err
			}
			if err := SaveConfig(path, a.cfg); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "Logged in to %s as %s\n", cfg.URL, me)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&lf.url, "url", "", "the Fleet Manager's URL, e.g. http://localhost:8000 (the API path "+DefaultAPIPath+" is added when it has none)")
	f.StringVar(&lf.token, "token", "", "a bearer token")
	f.StringVar(&lf.offlineToken, "offline-token", "", "an offline or refresh token, for the refresh_token grant")
	f.StringVar(&lf.offlineToken, "refresh-token", "", "the same as --offline-token")
	f.StringVar(&lf.tokenURL, "token-url", "", "the OAuth2 token endpoint of the identity provider")
	f.StringVar(&lf.clientID, "client-id", "", "the OAuth2 client id")
	f.StringVar(&lf.clientSecret, "client-secret", "", "the OAuth2 client secret (client credentials, or a confidential client's refresh)")
	f.StringSliceVar(&lf.scopes, "scope", nil, "scopes to ask for (repeat or comma-separate)")
	f.StringVar(&lf.audience, "audience", "", "the audience to ask for with client credentials, when the provider needs one")
	f.BoolVar(&lf.insecure, "insecure", false, "do not check the TLS certificates of the API and the token URL")
	f.BoolVar(&lf.insecureHTTP, "insecure-http", false, "send the credentials over plain HTTP to a --url or --token-url that is not loopback (127.0.0.0/8, ::1, localhost)")
	_ = cmd.MarkFlagRequired("url")
	cmd.MarkFlagsMutuallyExclusive("offline-token", "refresh-token")
	return cmd
}

// currentUser describes the caller as the API sees them, e.g. "alice (org org-1)".
func (a *app) currentUser(ctx context.Context) (string, error) {
	var name string
	_, _, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) {
		r, err := a.public.GetCurrentUserWithResponse(ctx)
		if err != nil {
			return nil, nil, err
		}
		if r.JSON200 != nil {
			name = r.JSON200.Username
			if name == "" && r.JSON200.Subject != nil {
				name = *r.JSON200.Subject
			}
			if r.JSON200.OrgId != "" {
				name += " (org " + r.JSON200.OrgId + ")"
			}
			if r.JSON200.AgentId != nil {
				name += " (agent " + *r.JSON200.AgentId + ")"
			}
		}
		return r.HTTPResponse, r.Body, nil
	})
	return name, err
}

func (a *app) logoutCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the login: remove the config file",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, err := a.configPath()
			if err != nil {
				return err
			}
			return RemoveConfig(path)
		},
	}
}

func (a *app) whoamiCommand() *cobra.Command {
	cols := []column{field("USERNAME", "username"), field("SUBJECT", "subject"), field("ORG", "org_id"),
		field("ROLES", "roles"), field("AGENT", "agent_id"), field("ISSUER", "issuer")}
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the API takes you for (GET /current_user)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.show(cmd.Context(), cols, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.GetCurrentUserWithResponse(ctx)
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "fleetctl %s (commit %s, %s)\n", version.Version, version.Commit, runtime.Version())
		},
	}
}

// splitLabels parses k=v flags into a map.
func splitLabels(kvs []string) (map[string]string, error) {
	labels := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &exitError{code: ExitLocal, msg: "--label takes key=value"}
		}
		labels[k] = v
	}
	return labels, nil
}
