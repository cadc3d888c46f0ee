package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// patroniTemplate is the node configuration the project ships; the tests
// render this very file.
const patroniTemplate = "../../scripts/dbops/patroni/patroni.yml"

// patroniSuperuserPassword is the test cluster's superuser password, given
// to Patroni through its environment as in production.
const patroniSuperuserPassword = "patroni-test-superuser"

// patroniOptions shape a test cluster.
type patroniOptions struct {
	// synchronous sets synchronous_mode (commits wait for the standby).
	synchronous bool
}

// patroniCluster is etcd and two Patroni nodes on loopback ports, in a
// folder of its own, run as the postgres user when the test runs as root.
type patroniCluster struct {
	t        testing.TB
	dir      string
	cred     *syscall.Credential
	etcdPort int
	etcd     *exec.Cmd
	nodes    []*patroniNode
	// binDir holds the PostgreSQL binaries (pg_ctl, pgbench, ...).
	binDir string
	// pgbenchReady: pgbench's tables are initialised.
	pgbenchReady bool
	// synchronous: the cluster was made with synchronous_mode.
	synchronous bool
}

// patroniNode is one Patroni process and the PostgreSQL it runs.
type patroniNode struct {
	name     string
	dir      string
	pgPort   int
	restPort int
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
}

// patroniStartCluster starts etcd and two Patroni nodes and waits until one
// leads and the other streams from it. Patroni's timings are tuned down
// from production's (ttl 30, loop_wait 10, retry_timeout 10) so that a
// failover fits in a test: ttl 5, loop_wait 1, retry_timeout 2.
func patroniStartCluster(t testing.TB, opts patroniOptions) *patroniCluster {
	t.Helper()
	for _, tool := range []string{"patroni", "patronictl", "etcd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("patroni: %s is not installed: run scripts/dbops/ensure-tools.sh (it installs Patroni and etcd from Debian's packages)", tool)
		}
	}
	bin, err := pgtest.ServerBinDir()
	if err != nil {
		t.Fatal(err)
	}
	c := &patroniCluster{t: t, binDir: bin, synchronous: opts.synchronous}
	// Not t.TempDir: the postgres user must reach it.
	if c.dir, err = os.MkdirTemp("", "fm-patroni-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.kill()
		}
		if c.etcd != nil {
			_ = c.etcd.Process.Kill()
			_ = c.etcd.Wait()
		}
		_ = os.RemoveAll(c.dir)
	})
	if os.Geteuid() == 0 {
		if c.cred, err = pgtest.PostgresUser(); err != nil {
			t.Fatalf("patroni: running as root, PostgreSQL needs the postgres user: %v", err)
		}
	}
	c.startEtcd()
	for i := range 2 {
		n := &patroniNode{name: fmt.Sprintf("db%d", i+1), pgPort: freePort(t), restPort: freePort(t)}
		n.dir = filepath.Join(c.dir, n.name)
		c.mkdir(n.dir)
		vars := patroniVars(fmt.Sprintf("127.0.0.1:%d", c.etcdPort), bin, opts, n)
		if err := os.WriteFile(n.config(), patroniRender(t, vars), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	c.waitHealthy(90 * time.Second)
	return c
}

// patroniVars are the values of the template's placeholders for node n.
func patroniVars(etcdHosts, binDir string, opts patroniOptions, n *patroniNode) map[string]string {
	return map[string]string{
		"PATRONI_CLUSTER":                 "fleet-db",
		"PATRONI_ETCD_HOSTS":              etcdHosts,
		"PATRONI_TTL":                     "5",
		"PATRONI_LOOP_WAIT":               "1",
		"PATRONI_RETRY_TIMEOUT":           "2",
		"PATRONI_SYNCHRONOUS_MODE":        strconv.FormatBool(opts.synchronous),
		"PATRONI_SYNCHRONOUS_MODE_STRICT": "false",
		"PATRONI_MAX_CONNECTIONS":         "100",
		"PATRONI_BIN_DIR":                 binDir,
		"PATRONI_PEER_CIDR":               "127.0.0.1/32",
		"PATRONI_CLIENT_CIDR":             "127.0.0.1/32",
		"PATRONI_NODE":                    n.name,
		"PATRONI_RESTAPI_LISTEN":          fmt.Sprintf("127.0.0.1:%d", n.restPort),
		"PATRONI_RESTAPI_CONNECT":         fmt.Sprintf("127.0.0.1:%d", n.restPort),
		"PATRONI_PG_LISTEN":               fmt.Sprintf("127.0.0.1:%d", n.pgPort),
		"PATRONI_PG_CONNECT":              fmt.Sprintf("127.0.0.1:%d", n.pgPort),
		"PATRONI_DATA_DIR":                filepath.Join(n.dir, "data"),
		"PATRONI_PGPASS":                  filepath.Join(n.dir, "pgpass"),
		"PATRONI_SOCKET_DIR":              n.dir,
	}
}

// patroniVariable is a placeholder of the template.
var patroniVariable = regexp.MustCompile(`\$\{(PATRONI_[A-Z_]+)\}`)

// patroniRender fills the shipped template as scripts/dbops/patroni/render.sh
// does: every placeholder must have a value, and every value a placeholder.
func patroniRender(t testing.TB, vars map[string]string) []byte {
	t.Helper()
	tmpl, err := os.ReadFile(patroniTemplate)
	if err != nil {
		t.Fatalf("patroni: reading the shipped template: %v", err)
	}
	used := map[string]bool{}
	out := patroniVariable.ReplaceAllStringFunc(string(tmpl), func(m string) string {
		name := patroniVariable.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok || v == "" {
			t.Fatalf("patroni: %s has %s, which the test does not set", patroniTemplate, name)
		}
		used[name] = true
		return v
	})
	for name := range vars {
		if !used[name] {
			t.Fatalf("patroni: the test sets %s, which %s does not use", name, patroniTemplate)
		}
	}
	return []byte(out)
}

func (c *patroniCluster) mkdir(dir string) {
	c.t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	if c.cred != nil {
		for _, d := range []string{c.dir, dir} {
			if err := os.Chown(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// startEtcd runs a one-member etcd of the cluster's own, not the system's.
func (c *patroniCluster) startEtcd() {
	c.t.Helper()
	c.etcdPort = freePort(c.t)
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(c.t))
	client := fmt.Sprintf("http://127.0.0.1:%d", c.etcdPort)
	log, err := os.Create(filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	c.etcd = exec.Command("etcd", "--name=fleet-db-etcd", "--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=fleet-db-etcd="+peer)
	c.etcd.Stdout, c.etcd.Stderr = log, log
	c.etcd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.etcd.Start(); err != nil {
		c.t.Fatalf("patroni: starting etcd: %v", err)
	}
	c.poll("etcd to answer", 30*time.Second, func() error {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /health: %d", resp.StatusCode)
		}
		return nil
	})
}

func (n *patroniNode) config() string { return filepath.Join(n.dir, "patroni.yml") }

// start runs the node's Patroni, which starts (or initialises) its server.
func (c *patroniCluster) start(n *patroniNode) {
	c.t.Helper()
	log, err := os.OpenFile(filepath.Join(n.dir, "patroni.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("patroni", n.config())
	cmd.Dir = n.dir
	cmd.Env = append(patroniEnviron(), "LC_ALL=C", "PATRONI_SUPERUSER_PASSWORD="+patroniSuperuserPassword,
		"PATRONI_REPLICATION_PASSWORD=patroni-test-replication", "PATRONI_REWIND_PASSWORD=patroni-test-rewind")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("patroni: starting node %s: %v", n.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

// patroniEnviron is the test's environment without PATRONI_ variables,
// which would override the rendered file.
func patroniEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATRONI_") {
			env = append(env, kv)
		}
	}
	return env
}

// kill ends the node as a lost machine would: SIGKILL to Patroni, to the
// postmaster (Patroni starts it in a session of its own) and to its
// children, so nothing is flushed, checkpointed or handed over.
func (n *patroniNode) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
	}
	if pid, err := n.postmaster(); err == nil {
		for _, p := range append([]int{pid}, pgtest.Children(pid)...) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if cmd != nil {
		<-done
	}
}

// postmaster reads the server's process id from postmaster.pid.
func (n *patroniNode) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// patroniStatus is what GET /patroni answers about a node.
type patroniStatus struct {
	State       string `json:"state"`
	Role        string `json:"role"`
	Timeline    int    `json:"timeline"`
	Replication []struct {
		ApplicationName string `json:"application_name"`
		State           string `json:"state"`
		SyncState       string `json:"sync_state"`
	} `json:"replication"`
}

func (n *patroniNode) status() (patroniStatus, error) {
	var st patroniStatus
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/patroni", n.restPort))
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET /patroni: %w", err)
	}
	return st, nil
}

// isPrimary asks the node's REST API, as a load balancer's health check
// does: GET /primary answers 200 on the leader only.
func (n *patroniNode) isPrimary() bool {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/primary", n.restPort))
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy waits until one node leads and the other streams from it,
// as its synchronous standby in synchronous mode; it returns the leader.
func (c *patroniCluster) waitHealthy(timeout time.Duration) *patroniNode {
	c.t.Helper()
	var leader *patroniNode
	c.poll("a leader and a streaming replica", timeout, func() error {
		leader = nil
		for _, n := range c.nodes {
			st, err := n.status()
			if err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
			if st.Role == "master" || st.Role == "primary" {
				leader = n
				want := "async"
				if c.synchronous {
					want = "sync"
				}
				if len(st.Replication) != 1 || st.Replication[0].State != "streaming" || st.Replication[0].SyncState != want {
					return fmt.Errorf("leader %s replicates to %+v, want one %s standby streaming", n.name, st.Replication, want)
				}
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		return nil
	})
	return leader
}

// other returns the node that is not n.
func (c *patroniCluster) other(n *patroniNode) *patroniNode {
	if c.nodes[0] == n {
		return c.nodes[1]
	}
	return c.nodes[0]
}

// poll calls check until it returns nil, failing t with the last error and
// the logs when timeout passes first.
func (c *patroniCluster) poll(what string, timeout time.Duration, check func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("patroni: waited %s for %s: %v\n%s", timeout, what, err, c.logs())
		}
		<-time.After(100 * time.Millisecond) // the polling interval of this wait
	}
}

// logs returns the tail of every node's log, for a failure message.
func (c *patroniCluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		log, _ := os.ReadFile(filepath.Join(n.dir, "patroni.log"))
		if len(log) > 3000 {
			log = log[len(log)-3000:]
		}
		fmt.Fprintf(&b, "--- %s patroni.log:\n%s\n", n.name, log)
	}
	return b.String()
}

// config is the fleet manager's view of the cluster: every node, in order,
// keeping the read-write one (the default with several hosts).
func (c *patroniCluster) config(name string) postgres.Config {
	cfg := postgres.DefaultConfig()
	cfg.Host = strings.TrimSuffix(strings.Repeat("127.0.0.1,", len(c.nodes)), ",")
	cfg.Ports = nil
	for _, n := range c.nodes {
		cfg.Ports = append(cfg.Ports, n.pgPort)
	}
	cfg.Port, cfg.User, cfg.Password, cfg.Name = cfg.Ports[0], "postgres", patroniSuperuserPassword, name
	return cfg
}

// flags are the fleet manager's flags for cfg that startFleetManagerOn
// does not pass: the port of each host and the password.
func (c *patroniCluster) flags(cfg postgres.Config) []string {
	ports := make([]string, len(cfg.Ports))
	for i, p := range cfg.Ports {
		ports[i] = strconv.Itoa(p)
	}
	return []string{"--db-port=" + strings.Join(ports, ","), "--db-password=" + cfg.Password}
}

// newDatabase creates database name on the primary and returns its
// configuration.
func (c *patroniCluster) newDatabase(name string) postgres.Config {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.config("postgres").DSN())
	if err != nil {
		c.t.Fatalf("patroni: connecting to the primary: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		c.t.Fatalf("patroni: CREATE DATABASE %s: %v", name, err)
	}
	// Until a replica has replayed it, connecting there fails with 3D000
	// (no such database), and pgx tries no further host after that error:
	// wait until every node has it.
	for _, n := range c.nodes {
		one := c.config(name)
		one.Host, one.Port, one.Ports, one.TargetSessionAttrs = "127.0.0.1", n.pgPort, nil, "any"
		c.poll("database "+name+" on "+n.name, 30*time.Second, func() error {
			conn, err := pgx.Connect(ctx, one.DSN())
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		})
	}
	return c.config(name)
}

// switchover hands the leadership to the replica with patronictl, as a
// planned restart does; it returns once the command has.
func (c *patroniCluster) switchover(from, to *patroniNode) {
	c.t.Helper()
	cmd := exec.Command("patronictl", "-c", from.config(), "switchover", "--leader", from.name, "--candidate", to.name, "--force")
	cmd.Env = patroniEnviron()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("patroni: patronictl switchover: %v\n%s\n%s", err, out, c.logs())
	}
}

// TestPatroniRenderScriptRendersWhatTheTestsRun: scripts/dbops/patroni/render.sh,
// what an operator runs, gives the same file as the tests' rendering, and
// refuses to render with a placeholder's variable unset, naming it.
func TestPatroniRenderScriptRendersWhatTheTestsRun(t *testing.T) {
	t.Parallel()
	n := &patroniNode{name: "db1", dir: "/var/lib/patroni/db1", pgPort: 5432, restPort: 8008}
	vars := patroniVars("etcd1:2379,etcd2:2379,etcd3:2379", "/usr/lib/postgresql/15/bin", patroniOptions{synchronous: true}, n)
	want := patroniRender(t, vars)
	render := func(vars map[string]string) (stdout, stderr string, err error) {
		cmd := exec.Command("../../scripts/dbops/patroni/render.sh")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.String(), errOut.String(), err
	}
	got, stderr, err := render(vars)
	if err != nil {
		t.Fatalf("render.sh: %v\n%s", err, stderr)
	}
	if got != string(want) {
		t.Errorf("render.sh rendered\n%s\nwant\n%s", got, want)
	}
	for _, line := range []string{"scope: fleet-db", "  hosts: etcd1:2379,etcd2:2379,etcd3:2379", "    synchronous_mode: true", "  listen: 127.0.0.1:5432"} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("render.sh output lacks the line %q", line)
		}
	}
	delete(vars, "PATRONI_TTL")
	if _, stderr, err := render(vars); err == nil || !strings.Contains(stderr, "set PATRONI_TTL") {
		t.Errorf("render.sh without PATRONI_TTL: %v, %q; want a failure naming it", err, stderr)
	}
}
