package pgtest

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// Server is a PostgreSQL server a test owns: its own initdb in a temporary
// directory, on a free loopback port, so that the test may restart it, crash
// it or freeze it without touching the server the other tests share. The
// server binaries are found with pg_config, under /usr/lib/postgresql/*/bin,
// or in FLEET_MANAGER_TEST_PG_BINDIR. Run as root, the server runs as the
// postgres user, since PostgreSQL refuses root.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cred *syscall.Credential

	opts ServerOptions

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// ServerOptions shape a test-owned server.
type ServerOptions struct {
	// Settings are extra server settings, each "name=value", passed as -c
	// at every start (archive_command, synchronous_commit, ...).
	Settings []string
	// Init fills the data directory instead of initdb: a restore from a
	// backup, or pg_basebackup for a standby. It runs with the directory
	// made and owned by the server's user; Command runs a tool as that user.
	Init func(s *Server, dataDir string) error
}

// StartServer initialises and starts a server for t, removed when t ends. It
// fails t (never skips it) when the server binaries are missing.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerWith(t, ServerOptions{})
}

// StartServerWith is StartServer shaped by opts.
func StartServerWith(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	bin, err := ServerBinDir()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s := &Server{t: t, bin: bin, opts: opts}
	if s.dir, err = os.MkdirTemp("", "fm-pgserver-"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { s.kill(); _ = os.RemoveAll(s.dir) })
	if os.Geteuid() == 0 {
		if s.cred, err = PostgresUser(); err != nil {
			t.Fatalf("pgtest: running as root, the server needs the postgres user: %v", err)
		}
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if opts.Init != nil {
		if err := s.makeDataDir(); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if err := opts.Init(s, s.dataDir()); err != nil {
			t.Fatalf("pgtest: preparing the data directory: %v", err)
		}
	} else {
		initdb := s.command(filepath.Join(bin, "initdb"), "-A", "trust", "-U", "postgres", "-N", "-E", "UTF8", "--locale=C", "-D", s.dataDir())
		if out, err := initdb.CombinedOutput(); err != nil {
			t.Fatalf("pgtest: initdb: %v\n%s", err, out)
		}
	}
	s.Start()
	return s
}

// makeDataDir makes the empty data directory, owned by the server's user
// with the mode PostgreSQL requires.
func (s *Server) makeDataDir() error {
	if err := os.Mkdir(s.dataDir(), 0o700); err != nil {
		return err
	}
	if s.cred != nil {
		return os.Chown(s.dataDir(), int(s.cred.Uid), int(s.cred.Gid))
	}
	return nil
}

// Command runs a binary (a server binary when bin is a bare name found in
// the server's folder, else as given) as the server's user, in the server's
// folder.
func (s *Server) Command(bin string, args ...string) *exec.Cmd {
	if !strings.ContainsRune(bin, '/') {
		if _, err := os.Stat(filepath.Join(s.bin, bin)); err == nil {
			bin = filepath.Join(s.bin, bin)
		}
	}
	return s.command(bin, args...)
}

// Dir is the server's own folder, which holds its data directory and log;
// files put there are readable by the server's user.
func (s *Server) Dir() string { return s.dir }

// DataDir is the server's data directory.
func (s *Server) DataDir() string { return s.dataDir() }

// Port is the port the server listens on (0 before the first start).
func (s *Server) Port() int { return s.port }

// Config returns the configuration of the server's maintenance database.
func (s *Server) Config() postgres.Config {
	cfg := ServerConfig()
	cfg.Host, cfg.Port, cfg.User, cfg.Password = "127.0.0.1", s.port, "postgres", ""
	return cfg
}

// NewDatabase creates an empty database on the server and returns its
// configuration.
func (s *Server) NewDatabase(t testing.TB, name string) postgres.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.Config().DSN())
	if err != nil {
		t.Fatalf("pgtest: connecting to the owned server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: CREATE DATABASE %s: %v", name, err)
	}
	cfg := s.Config()
	cfg.Name = name
	return cfg
}

// Start starts the stopped server on its port (a free one the first time) and
// waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	first := s.port == 0
	for attempt := 0; ; attempt++ {
		if s.port == 0 {
			s.port = freePort(s.t)
		}
		err := s.startOnce()
		if err == nil {
			return
		}
		if first && attempt < 3 && strings.Contains(s.logTail(), "could not bind") {
			s.port = 0 // lost the free port to another process: take another
			continue
		}
		s.t.Fatalf("pgtest: starting the owned server: %v\n%s", err, s.logTail())
	}
}

func (s *Server) startOnce() error {
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off",
		"-c", "max_connections=200", "-c", "logging_collector=off")
	for _, setting := range s.opts.Settings {
		cmd.Args = append(cmd.Args, "-c", setting)
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := s.ping(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return err
		}
		select {
		case <-done:
			return errors.New("the server exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the server down as `pg_ctl stop -m fast` does (SIGINT): it ends
// every session and checkpoints. Stop with an immediate shutdown
// (`-m immediate`, SIGQUIT) is a crash: the next start recovers from the WAL.
func (s *Server) Stop(immediate bool) {
	s.t.Helper()
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("pgtest: the owned server did not stop within 60 s of %v\n%s", sig, s.logTail())
	}
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// Restart is Stop then Start, as `pg_ctl restart -m fast` (or `-m
// immediate`) does.
func (s *Server) Restart(immediate bool) {
	s.t.Helper()
	s.Stop(immediate)
	s.Start()
}

// Freeze stops every process of the server (SIGSTOP): connections stay open
// and nothing answers, as on a server that hangs. Thaw resumes them.
func (s *Server) Freeze() {
	s.t.Helper()
	pid := s.postmaster()
	// The postmaster first, so it forks no backend meanwhile; then its
	// children, which each lead their own process group.
	s.signal(syscall.SIGSTOP, pid)
	s.signal(syscall.SIGSTOP, Children(pid)...)
}

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() {
	s.t.Helper()
	pid := s.postmaster()
	s.signal(syscall.SIGCONT, Children(pid)...)
	s.signal(syscall.SIGCONT, pid)
}

func (s *Server) postmaster() int {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("pgtest: the owned server is not running")
	}
	return s.cmd.Process.Pid
}

func (s *Server) signal(sig syscall.Signal, pids ...int) {
	s.t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			s.t.Fatalf("pgtest: signalling process %d of the owned server: %v", pid, err)
		}
	}
}

// Children returns the processes whose parent is pid, from /proc.
func Children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			pids = append(pids, child)
		}
	}
	return pids
}

// kill ends a server that is still running, frozen or not.
func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	for _, pid := range append(Children(cmd.Process.Pid), cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-done
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.Config().DSN())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// command runs a server binary, as the postgres user when the test runs as
// root, in its own process group, killed with the test binary.
func (s *Server) command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// ServerBinDir returns the folder of the PostgreSQL server binaries (initdb,
// postgres, pg_ctl, pg_basebackup), as StartServer finds it.
func ServerBinDir() (string, error) {
	candidates := []string{os.Getenv("FLEET_MANAGER_TEST_PG_BINDIR")}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, string(trimNewline(out)))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(debian)))
	for _, dir := range append(candidates, debian...) {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres): install them (Debian: apt-get install postgresql) or set FLEET_MANAGER_TEST_PG_BINDIR")
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// PostgresUser returns the credential of the postgres user, which server
// processes (PostgreSQL, and tools that start it) run as when the test runs
// as root.
func PostgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
