package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// logLine is a JSON log line, its fields decoded.
type logLine map[string]any

// logLines decodes every line of a JSON log; a line that is not JSON fails
// the test.
func logLines(t *testing.T, log string) []logLine {
	t.Helper()
	var lines []logLine
	for line := range strings.Lines(log) {
		var l logLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("log line %q is not JSON: %v", line, err)
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// TestCommandsLogTheSameService runs migrate, rotate-keys, doctor and serve
// under a fork's service name, given once in the environment as the
// template gives it: the first log line of each carries that name as
// service and its own name as command.
func TestCommandsLogTheSameService(t *testing.T) {
	t.Parallel()
	const service = "acme-fleet"
	env := map[string]string{"FLEET_MANAGER_SERVICE_NAME": service}
	cfg := pgtest.NewDatabase(t)
	key := keyFlag(t)
	first := map[string]logLine{}
	for _, args := range [][]string{{"migrate"}, {"rotate-keys", key}, append([]string{"doctor"}, lenient...)} {
		_, stderr, err := execute(t, env, append(args, dbFlags(cfg)...)...)
		if err != nil {
			t.Fatalf("%s = %v\n%s", args[0], err, stderr)
		}
		if lines := logLines(t, stderr); len(lines) > 0 {
			first[args[0]] = lines[0]
		}
	}
	ports := newServePorts(t)
	logs, stop := startServe(t, env, append(append(dbFlags(cfg), ports.flags()...), "--auth-dev-key-dir="+t.TempDir(), key)...)
	gomega.NewWithT(t).Eventually(logs.String).WithTimeout(20*time.Second).Should(gomega.ContainSubstring("\n"), "serve's first log line")
	if err := stop(); err != nil {
		t.Errorf("serve after shutdown = %v", err)
	}
	first["serve"] = logLines(t, logs.String())[0]

	for _, command := range []string{"migrate", "rotate-keys", "doctor", "serve"} {
		l, ok := first[command]
		if !ok {
			t.Errorf("%s logged nothing", command)
			continue
		}
		if l["service"] != service || l["command"] != command {
			t.Errorf("%s's first log line = %v, want service %s and command %s", command, l, service, command)
		}
	}
	// An invalid name is refused as serve refuses it, naming the flag.
	if _, _, err := execute(t, map[string]string{"FLEET_MANAGER_SERVICE_NAME": "Acme_Fleet"}, append([]string{"migrate"}, dbFlags(cfg)...)...); err == nil ||
		!strings.Contains(err.Error(), "service-name") {
		t.Errorf("migrate with service name Acme_Fleet = %v, want an error naming --service-name", err)
	}
}
