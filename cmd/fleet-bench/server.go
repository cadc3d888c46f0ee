package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// basePath is serve's default --api-base-path.
const basePath = "/api/fleet_manager/v1"

// server is the fleet-manager serve child process.
type server struct {
	proc       *childproc.Process
	logPath    string
	apiURL     string // base URL of the API, with the base path
	healthURL  string
	metricsURL string
	http       *http.Client
}

// serverFiles are the temporary files the child needs.
type serverFiles struct {
	keyDir, encryptionKey, secretsDir, log string
}

// startServer generates a master key, migrates the database and starts
// serve on free loopback ports, returning once /readyz answers 200.
func startServer(ctx context.Context, o options, db *benchDB, files serverFiles) (*server, error) {
	if err := runStep(ctx, o.FleetManager, "generate-key", files.encryptionKey); err != nil {
		return nil, err
	}
	dbFlags := []string{"--log-level=warn", "--db-host=" + o.DB.Host, "--db-port=" + strconv.Itoa(o.DB.Port),
		"--db-user=" + o.DB.User, "--db-name=" + db.name}
	if o.DB.Password != "" {
		if err := os.WriteFile(filepath.Join(files.secretsDir, "db.password"), []byte(o.DB.Password), 0o600); err != nil {
			return nil, err
		}
		dbFlags = append(dbFlags, "--secrets-dir="+files.secretsDir)
	}
	if err := runStep(ctx, o.FleetManager, append([]string{"migrate"}, dbFlags...)...); err != nil {
		return nil, err
	}
	ports, err := childproc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	args := append([]string{"serve"}, dbFlags...)
	args = append(args, "--api-bind-address="+addr(0), "--metrics-bind-address="+addr(1),
		"--health-bind-address="+addr(2), "--auth-dev-key-dir="+files.keyDir,
		"--encryption-key-file="+files.encryptionKey, "--hub-heartbeat-timeout="+o.HeartbeatTimeout.String(), "--reconcilers=true")
	s := &server{logPath: files.log, http: &http.Client{Timeout: 10 * time.Second},
		apiURL: "http://" + addr(0) + basePath, metricsURL: "http://" + addr(1) + "/metrics", healthURL: "http://" + addr(2)}
	s.proc, err = childproc.Start(childproc.Options{Name: "serve", Env: append(os.Environ(), o.ServeEnv...), LogPath: files.log},
		o.FleetManager, append(args, o.ServeArgs...)...)
	if err != nil {
		return nil, err
	}
	if err := s.proc.WaitReady(time.Minute, s.ready); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// runStep runs one short fleet-manager command, failing with its output.
func runStep(ctx context.Context, binary string, args ...string) error {
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", binary, args[0], err, out)
	}
	return nil
}

func (s *server) pid() int { return s.proc.Pid() }

// ready probes /readyz.
func (s *server) ready() error {
	resp, err := s.http.Get(s.healthURL + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// alive reports an error when the child has exited.
func (s *server) alive() error { return s.proc.Exited() }

// stop sends SIGTERM and waits for the child, killing it after 40 s.
func (s *server) stop() { s.proc.Stop(40 * time.Second) }

// logSummary counts the child's log lines by level and returns the most
// frequent messages at WARN and above (serve logs JSON).
func (s *server) logSummary(top int) (lines int, messages []string) {
	f, err := os.Open(s.logPath)
	if err != nil {
		return 0, nil
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		lines++
		counts[logKey(sc.Text())]++
	}
	return lines, topCounts(counts, top)
}
