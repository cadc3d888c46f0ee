package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/e2e/e2estack"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// TestRunHydraGivesThePersonasTokensWithTheirClaims runs serve as make
// run/hydra does, through scripts/hydra/devhydra and the real Hydra: the
// clients it creates get tokens from Hydra's token endpoint that the
// fleet-manager accepts with their organisation, user name and roles (the
// token hook's claims), the agent's token is an agent's, and stopping the
// tool stops serve and Hydra.
func TestRunHydraGivesThePersonasTokensWithTheirClaims(t *testing.T) {
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	tool := filepath.Join(dir, "devhydra")
	if out, err := exec.Command("go", "build", "-o", tool, "../../scripts/hydra/devhydra").CombinedOutput(); err != nil {
		t.Fatalf("go build devhydra: %v\n%s", err, out)
	}
	keyFile := filepath.Join(dir, "master.key")
	if err := secrets.GenerateKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	api, health, metrics := freePort(t), freePort(t), freePort(t)
	state := filepath.Join(dir, "hydra")
	cmd := exec.Command(tool, "--state-dir="+state, "--public-port=0", "--admin-port=0", "--hook-port=0", "--",
		fleetManagerBinary, "serve", "--migrate-on-start", "--log-format=json",
		"--db-host="+db.Host, "--db-port="+strconv.Itoa(db.Port), "--db-user="+db.User, "--db-name="+db.Name,
		fmt.Sprintf("--api-bind-address=127.0.0.1:%d", api), fmt.Sprintf("--health-bind-address=127.0.0.1:%d", health),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics), "--encryption-key-file="+keyFile)
	var mu sync.Mutex
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = e2estack.LockedWriter{Mu: &mu, W: &logs}, e2estack.LockedWriter{Mu: &mu, W: &logs}
	output := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	// Its own process group, so that a failed test kills serve and Hydra too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	finished := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(finished) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-finished
	})
	g.Eventually(func() int { return status(http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))) }).
		WithTimeout(3*time.Minute).WithPolling(200*time.Millisecond).Should(gomega.Equal(http.StatusOK),
		func() string { return "serve under devhydra never became ready; output:\n" + output() })
	g.Expect(output()).To(gomega.ContainSubstring("grant_type=client_credentials"), "it says how to get a token")

	env := readEnvFile(t, filepath.Join(state, "clients.env"))
	token := func(who string) string {
		form := url.Values{"grant_type": {"client_credentials"}, "audience": {env["HYDRA_AUDIENCE"]}}
		req, err := http.NewRequest(http.MethodPost, env["HYDRA_TOKEN_URL"], strings.NewReader(form.Encode()))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(env[who+"_CLIENT_ID"], env[who+"_CLIENT_SECRET"])
		var answer struct {
			AccessToken string `json:"access_token"`
		}
		g.Expect(call(t, req, http.StatusOK, &answer)).To(gomega.Succeed(), "token of %s", who)
		return answer.AccessToken
	}
	base := fmt.Sprintf("http://127.0.0.1:%d/api/fleet_manager/v1", api)
	request := func(method, path, tok, body string) *http.Request {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return req
	}

	alice, sre, agent := token("ALICE"), token("SRE"), token("AGENT")
	var me struct {
		Issuer   string   `json:"issuer"`
		OrgID    string   `json:"org_id"`
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	}
	g.Expect(call(t, request(http.MethodGet, "/current_user", alice, ""), http.StatusOK, &me)).To(gomega.Succeed())
	g.Expect(me.OrgID).To(gomega.Equal("org-1"))
	g.Expect(me.Username).To(gomega.Equal("alice"))
	g.Expect(me.Roles).To(gomega.Equal([]string{"org-admin"}))
	g.Expect(me.Issuer).To(gomega.Equal(env["HYDRA_ISSUER"]))

	// The SRE is an admin, alice is not; the agent heartbeats its hub.
	g.Expect(call(t, request(http.MethodGet, "/admin/hubs", alice, ""), http.StatusForbidden, nil)).To(gomega.Succeed())
	var hub struct {
		ID string `json:"id"`
	}
	g.Expect(call(t, request(http.MethodPost, "/admin/hubs", sre,
		`{"name":"hub-eu-1","zone":"eu","region":"eu-west-1","delivery_mode":"agent","capacity":100,"agent_identity":"hub-eu-1-agent"}`),
		http.StatusCreated, &hub)).To(gomega.Succeed())
	beat := `{"agent_version":"0.1.0","agent_start_generation":1,"applied_revision":0}`
	g.Expect(call(t, request(http.MethodPut, "/agent-hubs/"+hub.ID+"/status", agent, beat), http.StatusOK, nil)).To(gomega.Succeed())
	g.Expect(call(t, request(http.MethodPut, "/agent-hubs/"+hub.ID+"/status", alice, beat), http.StatusNotFound, nil)).
		To(gomega.Succeed(), "a user is no agent: no hub is theirs")

	// Stopping the tool stops serve, then Hydra.
	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(gomega.Succeed())
	g.Eventually(finished).WithTimeout(time.Minute).Should(gomega.BeClosed(), output)
	g.Expect(waitErr).NotTo(gomega.HaveOccurred(), output)
	_, err := http.Get(env["HYDRA_TOKEN_URL"])
	g.Expect(err).To(gomega.HaveOccurred(), "Hydra stopped with serve")
}

// status returns the status code of a GET, 0 when it failed.
func status(resp *http.Response, err error) int {
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// call sends req and checks the status; the body decodes into v when v is not nil.
func call(t *testing.T, req *http.Request, want int, v any) error {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s = %d, want %d: %s", req.Method, req.URL.Path, resp.StatusCode, want, body)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// readEnvFile reads the NAME=value lines of a shell file.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(name, "#") {
			env[name] = value
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}
