package hubtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a child program of the test binary whose output goes to a log
// file, so that a failed start can quote it.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // the exit status; read it only after done is closed
}

// startProcess starts bin with args, output to logPath. The child dies with
// the test binary even when TestMain never gets to stop it (see
// setDeathSignal).
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("startProcess(%s): %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("startProcess(%s): %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// stop asks the process to end and kills it after grace.
func (p *process) stop(grace time.Duration) {
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

// waitReady polls probe every 100 ms until it succeeds, the process exits or
// timeout passes; the errors quote the end of the log.
func (p *process) waitReady(timeout time.Duration, probe func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := probe()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return &exitedError{name: p.name, status: p.err, log: p.log, tail: p.logTail(40)}
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; end of %s:\n%s", p.name, timeout, err, p.log, p.logTail(40))
		}
	}
}

// exitedError says that a process ended before it was ready.
type exitedError struct {
	name, log, tail string
	status          error
}

func (e *exitedError) Error() string {
	return fmt.Sprintf("%s exited before it was ready (%v); end of %s:\n%s", e.name, e.status, e.log, e.tail)
}

// portTaken reports whether err says a process lost the race for a free port
// to someone else, which is worth another try on other ports.
func portTaken(err error) bool {
	var exited *exitedError
	return errors.As(err, &exited) && strings.Contains(exited.tail, "address already in use")
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
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

// freePorts returns n distinct loopback ports that were free a moment ago.
// Holding all listeners until the end keeps the ports distinct.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("freePorts: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
