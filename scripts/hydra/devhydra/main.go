// Command devhydra runs Ory Hydra as the identity provider of a local
// fleet-manager (make run/hydra), for development only: it is no part of the
// fleet-manager binary.
//
//	go run ./scripts/hydra/devhydra [flags] [-- command [args]]
//
// It starts Hydra (the binary scripts/hydra/build-hydra.sh builds) on
// loopback ports with its state under --state-dir: a SQLite database (so
// clients, signing keys and tokens survive a restart), the generated secrets
// (mode 0600), Hydra's config and log. It creates an OAuth2 client for each
// persona of the README's walk-through (the client credentials grant), writes
// their ids and secrets to clients.env in the state folder, and prints how to
// get a token. A token hook, served here, puts the claims of the client's
// metadata ("claims": org_id, username, roles, agent_id) into its access
// tokens, which Hydra does not do by itself.
//
// With a command, it runs the command with the --auth-* flags that trust this
// Hydra appended, and stops Hydra when the command ends; without one, it runs
// until interrupted.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// persona is an OAuth2 client of the walk-through and the claims its tokens carry.
type persona struct {
	id, env, about string
	claims         map[string]any
}

// personas are the walk-through's callers: a user of org-1, an SRE with the
// fleet-admin role and the agent of hub-eu-1.
var personas = []persona{
	{id: "alice", env: "ALICE", about: "a user of org-1 (role org-admin)",
		claims: map[string]any{"org_id": "org-1", "username": "alice", "roles": []string{"org-admin"}}},
	{id: "sre", env: "SRE", about: "an SRE with the fleet-admin role, no organisation",
		claims: map[string]any{"username": "sre", "roles": []string{"fleet-admin"}}},
	{id: "hub-eu-1-agent", env: "AGENT", about: "the agent of hub-eu-1 (agent_identity hub-eu-1-agent)",
		claims: map[string]any{"agent_id": "hub-eu-1-agent"}},
}

// topLevelClaims are the hook's claims that Hydra puts at the top of an
// access token (otherwise it nests them under "ext").
var topLevelClaims = []string{"org_id", "username", "roles", "agent_id"}

type options struct {
	stateDir   string
	bin        string
	publicPort int
	adminPort  int
	hookPort   int
	audience   string
}

// secrets are what survives a restart beside Hydra's database.
type secrets struct {
	System  string            `json:"system"`
	Clients map[string]string `json:"clients"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devhydra:", err)
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			os.Exit(exit.ExitCode())
		}
		os.Exit(1)
	}
}

func run() error {
	var o options
	flag.StringVar(&o.stateDir, "state-dir", ".local/hydra", "folder of Hydra's database, config, log and the generated secrets")
	flag.StringVar(&o.bin, "hydra-bin", "", "the hydra binary (default $HYDRA_BIN, else hydra/hydra in $FLEET_MANAGER_CACHE or ~/.cache/fleet-manager)")
	flag.IntVar(&o.publicPort, "public-port", 4444, "loopback port of Hydra's public API (token endpoint, JWKS); 0 picks a free one")
	flag.IntVar(&o.adminPort, "admin-port", 4445, "loopback port of Hydra's admin API; 0 picks a free one")
	flag.IntVar(&o.hookPort, "hook-port", 4446, "loopback port of the token hook; 0 picks a free one")
	flag.StringVar(&o.audience, "audience", "fleet-manager", "audience the clients may ask for and the command requires")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: devhydra [flags] [-- command [args]]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := o.resolve(); err != nil {
		return err
	}
	hook, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.hookPort)))
	if err != nil {
		return fmt.Errorf("token hook: %w", err)
	}
	o.hookPort = hook.Addr().(*net.TCPAddr).Port
	admin := fmt.Sprintf("http://127.0.0.1:%d", o.adminPort)
	public := fmt.Sprintf("http://127.0.0.1:%d", o.publicPort)
	client := &http.Client{Timeout: 30 * time.Second}
	go func() { _ = http.Serve(hook, tokenHook(client, admin)) }()

	sec, err := loadSecrets(filepath.Join(o.stateDir, "secrets.json"))
	if err != nil {
		return err
	}
	began := time.Now()
	hydra, err := startHydra(o, sec, client, admin, public)
	if err != nil {
		return err
	}
	defer hydra.Stop(10 * time.Second)
	for _, p := range personas {
		if err := putClient(client, admin, p, sec.Clients[p.id], o.audience); err != nil {
			return err
		}
	}
	issuer := public + "/"
	tokenURL := public + "/oauth2/token"
	envFile, err := writeEnv(o, sec, issuer, tokenURL)
	if err != nil {
		return err
	}
	authFlags := []string{"--auth-jwks-url=" + public + "/.well-known/jwks.json", "--auth-issuers=" + issuer,
		"--auth-audience=" + o.audience, "--auth-org-claim=org_id", "--auth-username-claims=username",
		"--auth-roles-claim=roles", "--auth-agent-claims=agent_id"}
	printHelp(os.Stderr, o, sec, issuer, tokenURL, envFile, authFlags, time.Since(began))

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "devhydra: Hydra runs until interrupted")
		<-signals
		return nil
	}
	cmd := exec.Command(flag.Arg(0), append(flag.Args()[1:], authFlags...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	stopWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			// A terminal's Ctrl-C reaches the command too; a SIGTERM sent to
			// this process alone is passed on.
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return err
		}
	}
}

// resolve fills the binary's default and the ports of 0.
func (o *options) resolve() error {
	if o.bin == "" {
		o.bin = os.Getenv("HYDRA_BIN")
	}
	if o.bin == "" {
		var err error
		if o.bin, err = childproc.CachePath("hydra", "hydra"); err != nil {
			return err
		}
	}
	if info, err := os.Stat(o.bin); err != nil || info.IsDir() {
		return fmt.Errorf("no hydra binary at %s: run scripts/hydra/build-hydra.sh", o.bin)
	}
	free, err := childproc.FreePorts(3)
	if err != nil {
		return err
	}
	for i, port := range []*int{&o.publicPort, &o.adminPort, &o.hookPort} {
		if *port == 0 {
			*port = free[i]
		}
	}
	abs, err := filepath.Abs(o.stateDir)
	if err != nil {
		return err
	}
	o.stateDir = abs
	return os.MkdirAll(o.stateDir, 0o700)
}

// loadSecrets reads the secrets file, creating the missing secrets.
func loadSecrets(path string) (secrets, error) {
	var s secrets
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &s); err != nil {
			return s, fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return s, err
	}
	if s.Clients == nil {
		s.Clients = map[string]string{}
	}
	changed := false
	if s.System == "" {
		s.System, changed = randomHex(), true
	}
	for _, p := range personas {
		if s.Clients[p.id] == "" {
			s.Clients[p.id], changed = randomHex(), true
		}
	}
	if !changed {
		return s, nil
	}
	data, err = json.MarshalIndent(s, "", "  ")
	if err != nil {
		return s, err
	}
	return s, os.WriteFile(path, append(data, '\n'), 0o600)
}

func randomHex() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startHydra writes Hydra's config, migrates its database and serves it,
// waiting until both APIs answer and the signing keys exist.
func startHydra(o options, sec secrets, client *http.Client, admin, public string) (*childproc.Process, error) {
	config := map[string]any{
		"dsn": "sqlite://" + filepath.Join(o.stateDir, "hydra.sqlite") + "?_fk=true",
		"serve": map[string]any{
			"public": map[string]any{"host": "127.0.0.1", "port": o.publicPort},
			"admin":  map[string]any{"host": "127.0.0.1", "port": o.adminPort},
		},
		"urls":       map[string]any{"self": map[string]any{"issuer": public + "/"}},
		"strategies": map[string]any{"access_token": "jwt"},
		"secrets":    map[string]any{"system": []string{sec.System}},
		"oauth2": map[string]any{
			"token_hook":               fmt.Sprintf("http://127.0.0.1:%d/token-hook", o.hookPort),
			"allowed_top_level_claims": topLevelClaims,
			"mirror_top_level_claims":  false,
		},
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(o.stateDir, "hydra.json")
	if err := os.WriteFile(configFile, data, 0o600); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + o.stateDir, "SQA_OPT_OUT=true"}
	migrate := exec.Command(o.bin, "migrate", "sql", "up", "--config", configFile, "--read-from-env", "--yes")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hydra migrate: %w\n%s", err, out)
	}
	proc, err := childproc.Start(childproc.Options{Name: "hydra", Dir: o.stateDir, Env: env,
		LogPath: filepath.Join(o.stateDir, "hydra.log")}, o.bin, "serve", "all", "--dev", "--config", configFile)
	if err != nil {
		return nil, err
	}
	get := func(u string) error {
		resp, err := client.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return nil
	}
	err = proc.WaitReady(60*time.Second, func() error {
		if err := get(admin + "/health/ready"); err != nil {
			return err
		}
		// Hydra makes its signing keys on first use: have it make them now.
		return get(public + "/.well-known/jwks.json")
	})
	if err != nil {
		proc.Stop(5 * time.Second)
		return nil, err
	}
	return proc, nil
}

// putClient creates the persona's client, replacing one of the same id.
func putClient(client *http.Client, admin string, p persona, secret, audience string) error {
	body, err := json.Marshal(map[string]any{
		"client_id": p.id, "client_secret": secret, "client_name": p.about,
		"grant_types": []string{"client_credentials"}, "response_types": []string{"token"},
		"token_endpoint_auth_method": "client_secret_basic", "audience": []string{audience},
		"metadata": map[string]any{"claims": p.claims},
	})
	if err != nil {
		return err
	}
	del, err := http.NewRequest(http.MethodDelete, admin+"/admin/clients/"+url.PathEscape(p.id), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(del)
	if err != nil {
		return err
	}
	resp.Body.Close()
	resp, err = client.Post(admin+"/admin/clients", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("creating client %s: %s: %s", p.id, resp.Status, answer)
	}
	return nil
}

// tokenHook answers Hydra's token hook: the access token of a client gets
// the claims of the client's metadata, read from the admin API.
func tokenHook(client *http.Client, admin string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Request struct {
				ClientID string `json:"client_id"`
			} `json:"request"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Request.ClientID == "" {
			http.Error(w, "no client_id", http.StatusBadRequest)
			return
		}
		resp, err := client.Get(admin + "/admin/clients/" + url.PathEscape(req.Request.ClientID))
		if err != nil {
			http.Error(w, "admin API unreachable", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var c struct {
			Metadata struct {
				Claims map[string]any `json:"claims"`
			} `json:"metadata"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&c) != nil {
			http.Error(w, "client unreadable", http.StatusBadGateway)
			return
		}
		if len(c.Metadata.Claims) == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"session": map[string]any{"access_token": c.Metadata.Claims}})
	})
}

// writeEnv writes the token URL and the clients' ids and secrets as shell
// variables, for `. .local/hydra/clients.env`.
func writeEnv(o options, sec secrets, issuer, tokenURL string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by scripts/hydra/devhydra: development values only.\n")
	fmt.Fprintf(&b, "HYDRA_ISSUER=%s\nHYDRA_TOKEN_URL=%s\nHYDRA_AUDIENCE=%s\n", issuer, tokenURL, o.audience)
	for _, p := range personas {
		fmt.Fprintf(&b, "%s_CLIENT_ID=%s\n%s_CLIENT_SECRET=%s\n", p.env, p.id, p.env, sec.Clients[p.id])
	}
	path := filepath.Join(o.stateDir, "clients.env")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// printHelp tells the user where Hydra is and how to get a token.
func printHelp(w io.Writer, o options, sec secrets, issuer, tokenURL, envFile string, authFlags []string, took time.Duration) {
	rel := envFile
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, envFile); err == nil && !strings.HasPrefix(r, "..") {
			rel = r
		}
	}
	fmt.Fprintf(w, "devhydra: Ory Hydra ready in %s: issuer %s, admin API http://127.0.0.1:%d, log %s\n",
		took.Round(time.Millisecond), issuer, o.adminPort, filepath.Join(o.stateDir, "hydra.log"))
	fmt.Fprintf(w, "devhydra: OAuth2 clients (client credentials grant; ids and secrets in %s):\n", rel)
	for _, p := range personas {
		fmt.Fprintf(w, "  %-15s %-50s secret %s\n", p.id, p.about, sec.Clients[p.id])
	}
	fmt.Fprintf(w, "devhydra: a token, e.g. alice's:\n")
	fmt.Fprintf(w, "  . %s\n", rel)
	fmt.Fprintf(w, "  curl -s -u \"$ALICE_CLIENT_ID:$ALICE_CLIENT_SECRET\" -d grant_type=client_credentials -d audience=%s %s | jq -r .access_token\n",
		o.audience, tokenURL)
	fmt.Fprintf(w, "devhydra: the command gets %s\n", strings.Join(authFlags, " "))
}
