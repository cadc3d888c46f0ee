package childproc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// TestProcessExited checks that Exited is nil while a child runs and, once
// it ended, reports its status and the end of its log.
func TestProcessExited(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := childproc.Start(childproc.Options{Name: "sleeper", LogPath: filepath.Join(dir, "sleeper.log")}, "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() <= 0 || p.Exited() != nil {
		t.Errorf("running child: Pid() = %d, Exited() = %v; want a pid and nil", p.Pid(), p.Exited())
	}
	p.Stop(5 * time.Second)
	if err := p.Exited(); err == nil || !strings.Contains(err.Error(), "sleeper exited (signal: terminated)") {
		t.Errorf("stopped child: Exited() = %v, want its exit", err)
	}

	q, err := childproc.Start(childproc.Options{Name: "quitter", LogPath: filepath.Join(dir, "quitter.log")}, "sh", "-c", "echo bye; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	err = q.WaitReady(10*time.Second, func() error { return errors.New("not yet") })
	if _, ok := errors.AsType[*childproc.ExitedError](err); !ok || !strings.Contains(err.Error(), "bye") {
		t.Errorf("WaitReady(child that quits) = %v, want an *ExitedError quoting its log", err)
	}
	if err := q.Exited(); err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "bye") {
		t.Errorf("ended child: Exited() = %v, want its status and log", err)
	}
}

// TestFreePortsNeverRepeats asks for one port at a time, as the tests'
// servers do, far more often than the kernel's ephemeral range makes a
// repeat unlikely: no port comes back twice.
func TestFreePortsNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 3000 {
		ports, err := childproc.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		if seen[ports[0]] {
			t.Fatalf("port %d returned twice", ports[0])
		}
		seen[ports[0]] = true
	}
}

// TestFreePortsAreBelowTheEphemeralRange: where the kernel's ephemeral
// range leaves room below it, every port comes from there, so that no
// outgoing connection can take it as its local port before the child binds
// it; where it does not, the ports are the kernel's, from the range.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatalf("reading the ephemeral range: %v", err)
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", data, err)
	}
	ports, err := childproc.FreePorts(200)
	if err != nil {
		t.Fatal(err)
	}
	room := low-10000 >= 5000
	for _, p := range ports {
		if room && (p < 10000 || p >= low) {
			t.Errorf("port %d is not between 10000 and the ephemeral range %d-%d", p, low, high)
		}
		if !room && (p < low || p > high) {
			t.Errorf("port %d is not the kernel's, from the ephemeral range %d-%d", p, low, high)
		}
	}
}

// TestStartOnFreePortsRetriesOnlyATakenPort: a try that lost its port is
// tried again, up to the attempts given; any other failure ends at once.
func TestStartOnFreePortsRetriesOnlyATakenPort(t *testing.T) {
	taken := &childproc.ExitedError{Name: "server", Tail: "listen tcp 127.0.0.1:1: bind: address already in use"}
	tries := 0
	_, err := childproc.StartOnFreePorts(3, time.Second, func() (*childproc.Process, error) {
		tries++
		return nil, taken
	})
	if !errors.Is(err, taken) || tries != 3 {
		t.Errorf("a port always taken: %d tries, %v; want 3 tries and the last error", tries, err)
	}
	other := errors.New("no such binary")
	tries = 0
	_, err = childproc.StartOnFreePorts(3, time.Second, func() (*childproc.Process, error) {
		tries++
		return nil, other
	})
	if !errors.Is(err, other) || tries != 1 {
		t.Errorf("another failure: %d tries, %v; want 1 try", tries, err)
	}
	tries = 0
	_, err = childproc.StartOnFreePorts(3, time.Second, func() (*childproc.Process, error) {
		if tries++; tries == 1 {
			return nil, taken
		}
		return nil, nil
	})
	if err != nil || tries != 2 {
		t.Errorf("a port taken once: %d tries, %v; want 2 tries and success", tries, err)
	}
}
