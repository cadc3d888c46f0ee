package hydratest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is the hydra child of the test binary; its output goes to a log
// file so that a failed start can quote it. (internal/hub/hubtest has the
// same small helper for etcd and kube-apiserver.)
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // the exit status; read it only after done is closed
}

// startProcess starts bin in dir with exactly env (nothing inherited, so a
// DSN meant for other tests cannot reach hydra), output to logPath.
func startProcess(dir, logPath string, env []string, bin string, args ...string) (*process, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("startProcess: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("startProcess(%s): %w", bin, err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// stop asks the process to end and kills it after grace.
func (p *process) stop(grace time.Duration) {
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

// waitReady polls probe every 50 ms until it succeeds, the process exits or
// timeout passes. exited tells the caller whether a retry on other ports
// makes sense.
func (p *process) waitReady(timeout time.Duration, probe func() error) (exited bool, err error) {
	deadline := time.Now().Add(timeout)
	for {
		err := probe()
		if err == nil {
			return false, nil
		}
		select {
		case <-p.done:
			return true, fmt.Errorf("hydra exited before it was ready (%v); end of %s:\n%s", p.err, p.log, p.logTail(40))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("hydra not ready after %s: %v; end of %s:\n%s", timeout, err, p.log, p.logTail(40))
		}
	}
}

// portTaken reports whether the log says another process took a port.
func (p *process) portTaken() bool {
	return strings.Contains(p.logTail(40), "address already in use")
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
