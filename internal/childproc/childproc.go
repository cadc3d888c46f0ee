// Package childproc runs the programs the test infrastructure starts beside
// a test binary (Hydra), and the server fleet-bench measures: output to a log
// file that a failed start quotes, a readiness probe, a graceful stop, and
// death with the parent even when TestMain never gets to stop them. Shared
// starts a service once per test binary (the test hub, Hydra).
package childproc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how to start a child.
type Options struct {
	// Name names the child in errors.
	Name string
	// Dir is its working directory; empty is the test's.
	Dir string
	// Env is its whole environment; nil inherits the test binary's.
	Env []string
	// LogPath receives its standard output and error.
	LogPath string
}

// Process is a running child.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // the exit status; read it only after done is closed
}

// Start starts bin with args.
func Start(opts Options, bin string, args ...string) (*Process, error) {
	out, err := os.Create(opts.LogPath)
	if err != nil {
		return nil, fmt.Errorf("Start(%s): %w", opts.Name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = opts.Dir, opts.Env
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("Start(%s): %w", opts.Name, err)
	}
	p := &Process{name: opts.Name, cmd: cmd, log: opts.LogPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited returns nil while the process runs and, once it has ended, an
// error with its exit status and the end of its log.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.name, p.err, p.log, p.LogTail(20))
	default:
		return nil
	}
}

// Stop asks the process to end and kills it after grace. A nil process is
// already stopped.
func (p *Process) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitReady polls probe every 50 ms until it succeeds, the process exits (an
// *ExitedError) or timeout passes; the errors quote the end of the log.
func (p *Process) WaitReady(timeout time.Duration, probe func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := probe()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return &ExitedError{Name: p.name, Status: p.err, Log: p.log, Tail: p.LogTail(40)}
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; end of %s:\n%s", p.name, timeout, err, p.log, p.LogTail(40))
		}
	}
}

// ExitedError says that a process ended before it was ready.
type ExitedError struct {
	Name, Log, Tail string
	Status          error
}

// Error describes the exit with the end of the log.
func (e *ExitedError) Error() string {
	return fmt.Sprintf("%s exited before it was ready (%v); end of %s:\n%s", e.Name, e.Status, e.Log, e.Tail)
}

// StartOnFreePorts calls start, which starts a process on ports it takes
// from FreePorts and waits until it is ready, up to attempts times: when a
// try fails because another process took one of its ports first
// (PortTaken), the try's process is stopped within grace and start is
// called again; any other failure stops it and is returned at once.
func StartOnFreePorts(attempts int, grace time.Duration, start func() (*Process, error)) (*Process, error) {
	for attempt := 1; ; attempt++ {
		p, err := start()
		if err == nil {
			return p, nil
		}
		p.Stop(grace)
		if !PortTaken(err) || attempt == attempts {
			return nil, err
		}
	}
}

// PortTaken reports whether err says a process lost the race for a free port
// to someone else, which is worth another try on other ports.
func PortTaken(err error) bool {
	var exited *ExitedError
	return errors.As(err, &exited) && strings.Contains(exited.Tail, "address already in use")
}

// LogTail returns the last n lines of the process log.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// FreePorts returns n distinct loopback ports that were free a moment ago
// and that no earlier call of this process returned. They are drawn at
// random from below the kernel's ephemeral range (ip_local_port_range):
// a port the kernel handed out for :0 is in that range, and between the
// pick and the child's bind the kernel could give it to any process's
// outgoing connection as its local port (a child that starts after a
// slower one, as serve after Hydra, lost its port that way). Below the
// range only a listener can take it, and each port is checked with one.
// Where the range leaves no room below it, the kernel picks, as before.
// Holding all listeners until the end keeps the n ports distinct.
func FreePorts(n int) ([]int, error) {
	handedMu.Lock()
	defer handedMu.Unlock()
	low, high := portRange()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == n+maxPortRetries {
			return nil, fmt.Errorf("FreePorts: no free port found in %d tries (%d found: %v)", tries, len(ports), ports)
		}
		addr := "127.0.0.1:0"
		if high > low {
			addr = fmt.Sprintf("127.0.0.1:%d", low+rand.IntN(high-low))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if high > low {
				continue // taken by a listener: draw another
			}
			return nil, fmt.Errorf("FreePorts: %w", err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		if handed[port] {
			continue
		}
		handed[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// Ports below firstPort are left to the machine's services.
const firstPort = 10000

// portRange is the range [low, high) FreePorts draws from: from firstPort
// to the start of the kernel's ephemeral range, or an empty range where
// that leaves fewer than minPortRange ports or the range cannot be read.
func portRange() (low, high int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var ephemeralLow, ephemeralHigh int
	if _, err := fmt.Sscan(string(data), &ephemeralLow, &ephemeralHigh); err != nil || ephemeralLow-firstPort < minPortRange {
		return 0, 0
	}
	return firstPort, ephemeralLow
}

// minPortRange is the smallest range worth drawing from.
const minPortRange = 5000

// maxPortRetries bounds how many ports FreePorts skips because an earlier
// call returned them.
const maxPortRetries = 1000

var (
	handedMu sync.Mutex
	// handed are the ports FreePorts returned in this process.
	handed = map[int]bool{}
)
