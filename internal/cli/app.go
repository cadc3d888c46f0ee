// Package cli is fleetctl, the command line of Fleet Manager: login and its
// config file, the commands of each resource, built on the generated clients
// of pkg/api/public and pkg/api/admin, and their output.
package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// DefaultAPIPath is appended to a --url that has no path.
const DefaultAPIPath = "/api/fleet_manager/v1"

// requestTimeout bounds one request; the change feed's long-polls wait less.
const requestTimeout = 2 * time.Minute

// app is what the commands share: where to write, the config file, and the
// clients once connected.
type app struct {
	stdout, stderr io.Writer
	env            func(string) (string, bool)
	output         string
	cfgPath        string
	cfg            *Config
	http           *http.Client
	public         *public.ClientWithResponses
	admin          *admin.ClientWithResponses
}

// Run runs fleetctl with args and returns its exit code; errors go to stderr
// as `Error: <message>`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	root := NewRootCommand(stdout, stderr, env)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		code, msg := exitCode(err)
		fmt.Fprintln(stderr, "Error:", msg)
		return code
	}
	return ExitOK
}

// NewRootCommand returns the fleetctl command and its subcommands.
func NewRootCommand(stdout, stderr io.Writer, env func(string) (string, bool)) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, env: env}
	root := &cobra.Command{
		Use:   "fleetctl",
		Short: "fleetctl: the command line of Fleet Manager",
		Long: `fleetctl: the command line of Fleet Manager.

Log in once with ` + "`fleetctl login`" + `; the other commands use the config file it writes
($` + ConfigEnv + `, or fleetctl/config.json in the user's config directory).
Exit codes: 0 ok, 1 usage or local error, 2 the API refused (4xx), 3 server
or transport error, 4 --wait ended failed or timed out.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return validFormat(a.output)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVarP(&a.output, "output", "o", formatTable, "output format: table, json or yaml")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{formatTable, formatJSON, formatYAML}, cobra.ShellCompDirectiveNoFileComp))
	root.AddCommand(a.loginCommand(), a.logoutCommand(), a.whoamiCommand(), a.versionCommand(),
		a.clustersCommand(), a.inventoryCommand(), a.policiesCommand(), a.poolsCommand(), a.reservationsCommand(),
		a.hubsCommand(), a.getCommand())
	return root
}

// printer returns the printer of -o on stdout.
func (a *app) printer() printer { return printer{w: a.stdout, format: a.output} }

// configPath returns the config file's path.
func (a *app) configPath() (string, error) {
	if a.cfgPath == "" {
		p, err := ConfigPath(a.env)
		if err != nil {
			return "", err
		}
		a.cfgPath = p
	}
	return a.cfgPath, nil
}

// connect reads the config file and builds the clients.
func (a *app) connect(ctx context.Context) error {
	path, err := a.configPath()
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		return err
	}
	return a.connectWith(ctx, cfg, true)
}

// connectWith builds the clients for cfg; new tokens are kept in cfg, and
// saved to the config file when persist is set.
func (a *app) connectWith(ctx context.Context, cfg *Config, persist bool) error {
	if err := checkPlainHTTP(cfg); err != nil {
		return err
	}
	a.cfg = cfg
	base := baseTransport(cfg.Insecure)
	save := func(tok *oauth2.Token) error {
		a.keepToken(tok)
		if !persist {
			return nil
		}
		path, err := a.configPath()
		if err != nil {
			return err
		}
		return SaveConfig(path, a.cfg)
	}
	// The token request carries the client secret or offline token: it
	// follows redirects only on the token endpoint's server, as the API's
	// requests do on theirs.
	src := tokenSource(ctx, cfg, &http.Client{Transport: base, Timeout: requestTimeout, CheckRedirect: sameServer}, save)
	a.http = &http.Client{Transport: &oauth2.Transport{Source: src, Base: base}, Timeout: requestTimeout, CheckRedirect: sameServer}
	var err error
	if a.public, err = public.NewClientWithResponses(cfg.URL, public.WithHTTPClient(a.http)); err != nil {
		return err
	}
	if a.admin, err = admin.NewClientWithResponses(cfg.URL, admin.WithHTTPClient(a.http)); err != nil {
		return err
	}
	return nil
}

// keepToken keeps a new token in the config; a rotated refresh token replaces the old one.
func (a *app) keepToken(tok *oauth2.Token) {
	a.cfg.AccessToken, a.cfg.Expiry = tok.AccessToken, tok.Expiry
	if tok.RefreshToken != "" {
		a.cfg.RefreshToken = tok.RefreshToken
	}
}

// baseTransport is the default transport, without certificate checks when insecure.
func baseTransport(insecure bool) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if insecure {
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with --insecure
	}
	return t
}

// checkPlainHTTP refuses to send credentials over plain HTTP to a host that
// is not loopback, unless the login asked for it (--insecure-http): anyone
// on the way would read the bearer token, offline token or client secret
// and could use it as the caller. Loopback never leaves the machine. Every
// command connects through here, so a saved URL is held to it as --url is.
func checkPlainHTTP(cfg *Config) error {
	if cfg.InsecureHTTP {
		return nil
	}
	for _, u := range []struct{ flag, raw string }{{"--url", cfg.URL}, {"--token-url", cfg.TokenURL}} {
		if u.raw == "" {
			continue
		}
		parsed, err := url.Parse(u.raw)
		if err != nil {
			return &exitError{code: ExitLocal, msg: u.flag + " is not a URL"}
		}
		if parsed.Scheme != "https" && !isLoopback(parsed.Hostname()) {
			return &exitError{code: ExitLocal, msg: fmt.Sprintf("%s %s://%s is plain HTTP to a host that is not this machine: "+
				"the credentials would cross the network unencrypted, readable by anyone on the way; "+
				"use https, or log in with --insecure-http to send them anyway", u.flag, parsed.Scheme, parsed.Host)}
		}
	}
	return nil
}

// isLoopback reports whether host is this machine: localhost, 127.0.0.0/8
// or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// normalizeURL checks --url and appends the API's path when it has none.
func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", &exitError{code: ExitLocal, msg: "--url must be an http or https URL, e.g. http://localhost:8000"}
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = DefaultAPIPath
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// call is one request through a generated client: its answer and body.
type call func(ctx context.Context) (*http.Response, []byte, error)

// do runs c and returns the body of a 2xx answer, or the error.
func (a *app) do(ctx context.Context, c call) (*http.Response, []byte, error) {
	if a.public == nil {
		if err := a.connect(ctx); err != nil {
			return nil, nil, err
		}
	}
	resp, body, err := c(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, nil, err
		}
		return nil, nil, &transportError{err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, body, apiError(resp, body)
	}
	return resp, body, nil
}

// show runs c and prints its answer as one object.
func (a *app) show(ctx context.Context, cols []column, c call) error {
	_, body, err := a.do(ctx, c)
	if err != nil {
		return err
	}
	return a.printer().object(body, cols)
}

// group makes cmd a command of subcommands: alone it prints its help, and an
// unknown subcommand is a usage error.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return cmd
}

// maxRedirects is how many redirects a request follows, as net/http's default.
const maxRedirects = 10

// sameServer follows a redirect only on the server the request went to: the
// oauth2 transport puts the token on every request, and a token request
// posts the credentials again on a 307 or 308, so a redirect to another host
// or scheme would hand them over.
func sameServer(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return &transportError{err: fmt.Errorf("stopped after %d redirects", maxRedirects)}
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return &exitError{code: ExitServer, msg: "the server redirected to another server; fleetctl does not send its token there"}
	}
	return nil
}
