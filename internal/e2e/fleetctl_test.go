package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/cli"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

var (
	fleetctlOnce   sync.Once
	fleetctlBinary string
	fleetctlErr    error
)

// buildFleetctl builds fleetctl once for the package, next to the
// fleet-manager binary TestMain built (and removes).
func buildFleetctl(t *testing.T) string {
	t.Helper()
	fleetctlOnce.Do(func() {
		fleetctlBinary = filepath.Join(filepath.Dir(fleetManagerBinary), "fleetctl")
		out, err := exec.Command("go", "build", "-o", fleetctlBinary, "../../cmd/fleetctl").CombinedOutput()
		if err != nil {
			fleetctlErr = fmt.Errorf("go build fleetctl: %v\n%s", err, out)
		}
	})
	if fleetctlErr != nil {
		t.Fatal(fleetctlErr)
	}
	return fleetctlBinary
}

// fleetctl runs the fleetctl binary with its own config file, as one user
// of one terminal.
type fleetctl struct {
	t      *testing.T
	bin    string
	config string
}

func newFleetctl(t *testing.T) *fleetctl {
	t.Helper()
	return &fleetctl{t: t, bin: buildFleetctl(t), config: filepath.Join(t.TempDir(), "fleetctl", "config.json")}
}

func (c *fleetctl) command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), cli.ConfigEnv+"="+c.config)
	return cmd
}

// run runs fleetctl and returns its exit code, stdout and stderr.
func (c *fleetctl) run(args ...string) (int, string, string) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	cmd := c.command(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	c.t.Fatalf("fleetctl %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

// ok runs fleetctl and fails the test unless it exits 0.
func (c *fleetctl) ok(args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run(args...)
	if code != 0 {
		c.t.Fatalf("fleetctl %s = exit %d; stderr: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// json runs fleetctl with -o json and decodes its output into v.
func (c *fleetctl) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("fleetctl %s -o json printed %q: %v", strings.Join(args, " "), out, err)
	}
}

// cliCluster is the part of a registration the walk-through reads.
type cliCluster struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Phase string `json:"phase"`
	Hub   *struct {
		Name string `json:"name"`
	} `json:"hub"`
	Conditions []struct {
		Type, Status, Reason string
	} `json:"conditions"`
}

// condition returns "Status Reason" of the condition typ.
func (c cliCluster) condition(typ string) string {
	for _, cond := range c.Conditions {
		if cond.Type == typ {
			return cond.Status + " " + cond.Reason
		}
	}
	return ""
}

// apiErrorLine is how fleetctl prints an API's refusal.
var apiErrorLine = regexp.MustCompile(`^Error: .+ \(FLEET-MGMT-\d+, operation \S+\)\n$`)

// TestFleetctlWalkthrough is the README's walk-through with fleetctl: an SRE
// registers a hub; its agent's heartbeats are played with the private API as
// the README plays them with curl; a user registers a cluster, sees it placed
// and published, then delivered once the agent acknowledges; deregisters it
// with --wait, which ends when it is gone.
func TestFleetctlWalkthrough(t *testing.T) {
	g := gomega.NewWithT(t)
	hydra := hydratest.Start(t)
	fm := startFleetManager(t, hydra)
	server := strings.TrimSuffix(fm.Base, cli.DefaultAPIPath)

	// 1. An SRE logs in and registers a hub.
	sre := newFleetctl(t)
	sre.ok("login", "--url", server, "--token", fm.token("sre", "bob", "fleet-admin"))
	if st, err := os.Stat(sre.config); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file after login: %v, %v; want mode 0600", st, err)
	}
	var me struct {
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	}
	sre.json(&me, "whoami")
	if me.Username != "bob" || len(me.Roles) != 1 || me.Roles[0] != "fleet-admin" {
		t.Errorf("fleetctl whoami = %+v, want bob with fleet-admin", me)
	}
	var hub struct {
		ID       string `json:"id"`
		Revision int64  `json:"revision"`
		Cordoned bool   `json:"cordoned"`
	}
	sre.json(&hub, "hubs", "register", "--name", "hub-cli-1", "--zone", "eu", "--region", "eu-west-1",
		"--capacity", "100", "--agent-identity", "hub-cli-1-agent")
	if hub.ID == "" {
		t.Fatalf("hubs register printed no id")
	}
	if out := sre.ok("hubs", "list"); !strings.Contains(out, "hub-cli-1") || !strings.HasPrefix(out, "ID ") {
		t.Errorf("fleetctl hubs list = %q, want a table with hub-cli-1", out)
	}
	if out := sre.ok("get", "/api/fleet_manager/v1/admin/hubs/"+hub.ID); !strings.Contains(out, `"name": "hub-cli-1"`) {
		t.Errorf("fleetctl get /api/.../admin/hubs/ID = %q", out)
	}

	// 2. The hub's agent sends a heartbeat: the hub is ready for placements.
	beat := playAgentHeartbeat(t, fm, hub.ID, "hub-cli-1-agent")
	beat(0)
	rev := func() int64 { sre.json(&hub, "hubs", "get", hub.ID); return hub.Revision }

	// 3. A user registers a cluster; it is placed and published.
	user := newFleetctl(t)
	user.ok("login", "--url", server, "--token", fm.token("org-cli", "ann"))
	var c cliCluster
	user.json(&c, "clusters", "register", "--name", "prod-1", "--zone", "eu", "--region", "eu-west-1",
		"--product", "ROSA", "--label", "env=prod")
	if c.ID == "" || c.Name != "prod-1" {
		t.Fatalf("clusters register printed %+v", c)
	}
	g.Eventually(func(g gomega.Gomega) {
		var got cliCluster
		user.json(&got, "clusters", "get", c.ID)
		g.Expect(got.Hub).NotTo(gomega.BeNil())
		g.Expect(got.Hub.Name).To(gomega.Equal("hub-cli-1"))
		g.Expect(got.condition("Delivered")).To(gomega.Equal("False PublishedToAgent"))
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(gomega.Succeed(), "cluster placed and published")
	out := user.ok("clusters", "list", "--search", "name = 'prod-1'", "--order-by", "name")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "hub-cli-1") ||
		!strings.Contains(lines[1], "Delivered=False:PublishedToAgent") {
		t.Errorf("fleetctl clusters list --search = %q, want one row on hub-cli-1", out)
	}

	// 4. The agent acknowledges the hub's revision: Delivered turns True.
	beat(rev())
	g.Eventually(func() string {
		var got cliCluster
		user.json(&got, "clusters", "get", c.ID)
		return got.condition("Delivered")
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Equal("True AcknowledgedByAgent"))

	// 5 and 6. Deregister with --wait, which follows the withdrawal until
	// the cluster is gone once the agent acknowledges the new revision.
	dereg := user.command("clusters", "deregister", c.ID, "--wait", "--interval", "200ms", "--timeout", "2m")
	var derOut, derErr lockedBuffer
	dereg.Stdout, dereg.Stderr = &derOut, &derErr
	if err := dereg.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dereg.Wait() }()
	g.Eventually(func() string { return derErr.String() }).WithTimeout(30*time.Second).
		Should(gomega.ContainSubstring("prod-1 deleting on hub-cli-1"), "deregister --wait's progress")
	g.Eventually(func() bool {
		beat(rev())
		select {
		case err := <-done:
			done <- err
			return true
		default:
			return false
		}
	}).WithTimeout(60*time.Second).WithPolling(300*time.Millisecond).Should(gomega.BeTrue(), "deregister --wait ends; stderr: %s", &derErr)
	if err := <-done; err != nil {
		t.Errorf("fleetctl clusters deregister --wait = %v; stderr: %s", err, derErr.String())
	}
	if !strings.Contains(derErr.String(), " prod-1 gone\n") {
		t.Errorf("deregister --wait's stderr = %q, want it to end with gone", derErr.String())
	}
	code, _, errOut := user.run("clusters", "get", c.ID)
	if code != cli.ExitRefused || !apiErrorLine.MatchString(errOut) {
		t.Errorf("fleetctl clusters get (gone) = exit %d, stderr %q; want %d and an API error line", code, errOut, cli.ExitRefused)
	}

	// A user may not use the admin API: refused, exit 2.
	if code, _, errOut := user.run("hubs", "list"); code != cli.ExitRefused || !apiErrorLine.MatchString(errOut) {
		t.Errorf("fleetctl hubs list as a user = exit %d, %q; want %d", code, errOut, cli.ExitRefused)
	}

	// --wait ends with exit 4 when the registration cannot get ready: with
	// the only hub cordoned, no hub takes it.
	sre.json(&hub, "hubs", "cordon", hub.ID)
	if !hub.Cordoned {
		t.Errorf("hubs cordon: cordoned = false")
	}
	code, _, errOut = user.run("clusters", "register", "--name", "stuck-1", "--zone", "eu", "--wait", "--interval", "200ms", "--timeout", "2s")
	if code != cli.ExitWait || !strings.Contains(errOut, "stuck-1 accepted") {
		t.Errorf("fleetctl clusters register --wait (no hub) = exit %d, stderr %q; want %d and a progress line", code, errOut, cli.ExitWait)
	}
	sre.json(&hub, "hubs", "uncordon", hub.ID)
	if hub.Cordoned {
		t.Errorf("hubs uncordon: cordoned = true")
	}

	// Two registrations now: a page of one says there is more, --all-pages
	// fetches both; update changes the labels.
	user.json(&c, "clusters", "register", "--name", "extra-1", "--zone", "eu")
	code, out, errOut = user.run("clusters", "list", "--size", "1", "--order-by", "name")
	if code != 0 || !strings.Contains(out, "extra-1") || !strings.Contains(errOut, "1 of 2 shown: --page 2") {
		t.Errorf("clusters list --size 1 = exit %d, %q, stderr %q; want extra-1 and a hint", code, out, errOut)
	}
	var all struct {
		Total int `json:"total"`
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	user.json(&all, "clusters", "list", "--size", "1", "--all-pages", "--order-by", "name")
	if all.Total != 2 || len(all.Items) != 2 || all.Items[0].Name != "extra-1" || all.Items[1].Name != "stuck-1" {
		t.Errorf("clusters list --size 1 --all-pages = %+v, want extra-1 and stuck-1", all)
	}
	var updated struct {
		Labels map[string]string `json:"labels"`
	}
	user.json(&updated, "clusters", "update", c.ID, "--label", "env=staging")
	if len(updated.Labels) != 1 || updated.Labels["env"] != "staging" {
		t.Errorf("clusters update --label env=staging: labels = %v", updated.Labels)
	}

	// policies update sends a PATCH: the file's policy replaces the body,
	// the placement it does not name stays.
	dir := t.TempDir()
	writeJSONFile(t, filepath.Join(dir, "create.json"), public.PolicyCreate{Zone: ptr("eu"), Policy: e2ePolicy("cli-audit", "inform"),
		Placement: public.PolicyPlacement{LabelSelector: public.LabelSelector{MatchLabels: &map[string]string{"env": "staging"}}}})
	writeJSONFile(t, filepath.Join(dir, "patch.json"), public.PolicyPatch{Policy: ptr(e2ePolicy("cli-audit", "enforce"))})
	var policy public.Policy
	user.json(&policy, "policies", "create", "-f", filepath.Join(dir, "create.json"))
	user.json(&policy, "policies", "update", policy.Id, "-f", filepath.Join(dir, "patch.json"), "--if-match", `"1"`)
	if spec, _ := policy.Policy["spec"].(map[string]any); policy.Generation != 2 || spec["remediationAction"] != "enforce" ||
		policy.Placement.LabelSelector.MatchLabels == nil || (*policy.Placement.LabelSelector.MatchLabels)["env"] != "staging" {
		t.Errorf("policies update with a policy only = generation %d, %v, placement %+v; want 2, enforce, env=staging kept",
			policy.Generation, policy.Policy["spec"], policy.Placement)
	}
	if code, _, errOut := user.run("policies", "update", policy.Id, "-f", filepath.Join(dir, "patch.json"), "--if-match", `"1"`); code != cli.ExitRefused || !strings.Contains(errOut, "FLEET-MGMT-9") {
		t.Errorf("policies update with a stale If-Match = exit %d, stderr %q; want %d and code 9", code, errOut, cli.ExitRefused)
	}
}

// writeJSONFile writes v as JSON into path.
func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// playAgentHeartbeat returns a function that sends hubID's heartbeat with an
// applied revision, as the agent agentID, through the generated private client.
func playAgentHeartbeat(t *testing.T, fm *fleetManager, hubID, agentID string) func(applied int64) {
	t.Helper()
	cfg := fm.authCfg
	// The e2e server reads the agent id from client_id (--auth-agent-claims).
	cfg.AgentClaims = []string{"client_id"}
	tok, err := fm.devKey.Mint(cfg, auth.TokenRequest{AgentID: agentID, TTL: time.Hour, Audience: audience}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client, err := private.NewClientWithResponses(fm.Base)
	if err != nil {
		t.Fatal(err)
	}
	return func(applied int64) {
		t.Helper()
		resp, err := client.PutHubStatusWithResponse(context.Background(), hubID, private.HubStatusReport{AgentVersion: "0.1.0",
			AgentStartGeneration: 1, AppliedRevision: applied}, bearer(tok))
		if err != nil {
			t.Fatalf("PutHubStatus(%d): %v", applied, err)
		}
		if resp.JSON200 == nil {
			t.Fatalf("PutHubStatus(%d) = %d %s", applied, resp.StatusCode(), resp.Body)
		}
	}
}

// lockedBuffer is a buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFleetctlClientCredentialsLogin logs in with OIDC client credentials
// at the real Hydra: the token is exchanged, the server takes it (as the
// agent identity its client id makes it here, since Hydra's client
// credentials tokens carry no organisation), and an expired token is
// renewed and written back to the config file.
func TestFleetctlClientCredentialsLogin(t *testing.T) {
	hydra := hydratest.Start(t)
	fm := startFleetManager(t, hydra)
	server := strings.TrimSuffix(fm.Base, cli.DefaultAPIPath)
	hydra.CreateClient(t, "fleetctl-cc", "secret-of-fleetctl-cc", audience)
	ctl := newFleetctl(t)

	code, _, errOut := ctl.run("login", "--url", server, "--token-url", hydra.TokenURL(), "--client-id", "fleetctl-cc",
		"--client-secret", "wrong", "--audience", audience)
	if code != cli.ExitRefused || !strings.Contains(errOut, "the token endpoint refused") {
		t.Errorf("login with a wrong secret = exit %d, %q; want %d", code, errOut, cli.ExitRefused)
	}
	if _, err := os.Stat(ctl.config); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed login wrote the config file: %v", err)
	}

	code, _, errOut = ctl.run("login", "--url", server, "--token-url", hydra.TokenURL(), "--client-id", "fleetctl-cc",
		"--client-secret", "secret-of-fleetctl-cc", "--audience", audience)
	if code != 0 || !strings.Contains(errOut, "(agent fleetctl-cc)") {
		t.Fatalf("login with client credentials = exit %d, %q", code, errOut)
	}
	var me struct {
		AgentID string `json:"agent_id"`
		Issuer  string `json:"issuer"`
	}
	ctl.json(&me, "whoami")
	if me.AgentID != "fleetctl-cc" || me.Issuer != hydra.Issuer() {
		t.Errorf("whoami = %+v, want agent fleetctl-cc from %s", me, hydra.Issuer())
	}

	// Expire the kept token: the next command fetches a new one and keeps it.
	before, err := cli.LoadConfig(ctl.config)
	if err != nil || before.AccessToken == "" || before.ClientSecret != "secret-of-fleetctl-cc" {
		t.Fatalf("config after login = %+v, %v", before, err)
	}
	expired := *before
	expired.Expiry = time.Now().Add(-time.Minute)
	if err := cli.SaveConfig(ctl.config, &expired); err != nil {
		t.Fatal(err)
	}
	ctl.json(&me, "whoami")
	after, err := cli.LoadConfig(ctl.config)
	if err != nil || after.AccessToken == before.AccessToken || !after.Expiry.After(time.Now()) {
		t.Errorf("config after a command with an expired token: new token %v, expiry %v, %v; want a new, valid token",
			after.AccessToken != before.AccessToken, after.Expiry, err)
	}
	if st, err := os.Stat(ctl.config); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file after the renewal: %v, %v; want mode 0600", st, err)
	}
}

// TestFleetctlRegisterWaitAndWatch: with a real agent and hub, register
// --wait ends when the registration is ready, and inventory watch prints
// the managed cluster the agent reports.
func TestFleetctlRegisterWaitAndWatch(t *testing.T) {
	s := newStack(t, "hub-e2e-cli")
	user := newFleetctl(t)
	user.ok("login", "--url", strings.TrimSuffix(s.fm.Base, cli.DefaultAPIPath), "--token", s.user)

	watch := user.command("inventory", "watch", "--from-start", "--poll-wait", "2s", "-o", "json")
	var watchOut, watchErr lockedBuffer
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	watchDone := make(chan error, 1)
	go func() { watchDone <- watch.Wait() }()
	t.Cleanup(func() {
		if watch.ProcessState == nil {
			_ = watch.Process.Kill()
		}
	})

	// Registered without credentials, the cluster is imported by hand:
	// while register --wait waits, its owner reads the import material
	// and applies it on the cluster (the stand-in joins its klusterlet).
	register := user.command("clusters", "register", "--name", "wait-1", "--zone", "eu", "--label", "env=e2e",
		"--wait", "--interval", "300ms", "--timeout", "2m", "-o", "json")
	var registerOut, registerErr bytes.Buffer
	register.Stdout, register.Stderr = &registerOut, &registerErr
	if err := register.Start(); err != nil {
		t.Fatal(err)
	}
	registered := make(chan error, 1)
	go func() { registered <- register.Wait() }()
	g := gomega.NewWithT(t)
	var waiting public.Cluster
	g.Eventually(func() string {
		resp, err := s.fm.Public.ListClustersWithResponse(context.Background(), &public.ListClustersParams{Search: ptr("name = 'wait-1'")}, bearer(s.user))
		if err != nil || resp.JSON200 == nil || len(resp.JSON200.Items) != 1 {
			return ""
		}
		waiting = resp.JSON200.Items[0]
		return waiting.Id
	}).WithTimeout(30*time.Second).ShouldNot(gomega.BeEmpty(), "the registration register --wait made")
	waitingName := managedClusterName(waiting)
	g.Eventually(func() string { _, out, _ := user.run("clusters", "import", waiting.Id); return out }).WithTimeout(30*time.Second).
		Should(gomega.ContainSubstring("import manifests of "+waitingName), "clusters import before the cluster joined")
	s.imports.importManually(waitingName)
	code := 0
	var exit *exec.ExitError
	switch err := <-registered; {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	out, errOut := registerOut.String(), registerErr.String()
	var c cliCluster
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.Phase != "ready" {
		t.Fatalf("clusters register --wait = exit %d, stdout %q, stderr %q; want ready", code, out, errOut)
	}
	if !strings.Contains(errOut, "wait-1 ready on hub-e2e-cli: ") {
		t.Errorf("register --wait's progress lines = %q, want one for ready", errOut)
	}
	name := managedClusterName(public.Cluster{Id: c.ID, Name: c.Name})

	g.Eventually(watchOut.String).WithTimeout(60*time.Second).Should(gomega.ContainSubstring(`"name":"`+name+`"`),
		func() string { return "inventory watch; stderr: " + watchErr.String() })
	if err := watch.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-watchDone; err != nil {
		t.Errorf("inventory watch after SIGINT = %v, want exit 0; stderr: %s", err, watchErr.String())
	}
	if out := user.ok("inventory", "list", "--search", "name = '"+name+"'"); !strings.Contains(out, name) || !strings.Contains(out, "hub-e2e-cli") {
		t.Errorf("inventory list --search = %q, want %s on hub-e2e-cli", out, name)
	}
	g.Eventually(func() string { _, out, _ := user.run("clusters", "import", c.ID); return out }).WithTimeout(30*time.Second).
		Should(gomega.ContainSubstring("import manifests of "+name), "clusters import")
}
