package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// basePath is serve's default --api-base-path.
const basePath = "/api/fleet_manager/v1"

// server is the fleet-manager serve child process.
type server struct {
	cmd        *exec.Cmd
	exited     chan struct{}
	waitErr    error
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
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve"}, dbFlags...)
	args = append(args, "--api-bind-address=127.0.0.1:"+ports[0], "--metrics-bind-address=127.0.0.1:"+ports[1],
		"--health-bind-address=127.0.0.1:"+ports[2], "--auth-dev-key-dir="+files.keyDir,
		"--encryption-key-file="+files.encryptionKey, "--hub-heartbeat-timeout="+o.HeartbeatTimeout.String(), "--reconcilers=true")
	s := &server{logPath: files.log, exited: make(chan struct{}), http: &http.Client{Timeout: 10 * time.Second},
		apiURL: "http://127.0.0.1:" + ports[0] + basePath, metricsURL: "http://127.0.0.1:" + ports[1] + "/metrics",
		healthURL: "http://127.0.0.1:" + ports[2]}
	if err := s.start(o.FleetManager, append(args, o.ServeArgs...), o.ServeEnv); err != nil {
		return nil, err
	}
	if err := s.awaitReady(ctx, time.Minute); err != nil {
		s.stop()
		return nil, fmt.Errorf("%w\n%s", err, s.logTail(20))
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

func (s *server) start(binary string, args, env []string) error {
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.Env = append(os.Environ(), env...)
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s serve: %w", binary, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	return nil
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// awaitReady polls /readyz until it answers 200, the child exits or timeout passes.
func (s *server) awaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := s.http.Get(s.healthURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("serve exited before it was ready: %v", s.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("serve was not ready within %s", timeout)
}

// alive reports an error when the child has exited.
func (s *server) alive() error {
	select {
	case <-s.exited:
		return fmt.Errorf("serve exited: %v\n%s", s.waitErr, s.logTail(20))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for the child, killing it after 40 s.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(40 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// logTail returns the last n lines of the child's log.
func (s *server) logTail(n int) string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

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

// freePorts reserves n loopback ports and releases them for the child.
func freePorts(n int) ([]string, error) {
	var ports []string
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("freePorts"), err)
		}
		listeners = append(listeners, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}
