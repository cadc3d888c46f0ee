package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

func TestEnvName(t *testing.T) {
	t.Parallel()
	if got := config.EnvName("FLEET_MANAGER_", "db-max-open-conns"); got != "FLEET_MANAGER_DB_MAX_OPEN_CONNS" {
		t.Errorf("EnvName(db-max-open-conns) = %q", got)
	}
}

func TestBindSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db.password"), []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "db.host"), 0o700); err != nil { // a directory cannot be read as a file
		t.Fatal(err)
	}
	var password, host, user string
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.StringVar(&password, "db-password", "", "")
	fs.StringVar(&host, "db-host", "localhost", "")
	fs.StringVar(&user, "db-user", "postgres", "")
	files := []config.SecretFile{{"db-password", "db.password"}, {"db-user", "db.user"}}
	noEnv := func(string) bool { return false }
	if err := config.BindSecrets(fs, dir, files, noEnv); err != nil {
		t.Fatalf("BindSecrets(): %v", err)
	}
	if password != "s3cret" || user != "postgres" {
		t.Errorf("BindSecrets(): password %q, user %q; want the trimmed file and the untouched default", password, user)
	}
	err := config.BindSecrets(fs, dir, []config.SecretFile{{"db-host", "db.host"}}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "--secrets-dir: reading") {
		t.Errorf("BindSecrets(unreadable file) = %v, want an error naming --secrets-dir", err)
	}
	err = config.BindSecrets(fs, dir, []config.SecretFile{{"no-such-flag", "x"}}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "unknown flag --no-such-flag") {
		t.Errorf("BindSecrets(unknown flag) = %v", err)
	}
}

func TestProblems(t *testing.T) {
	t.Parallel()
	var p config.Problems
	if p.Err() != nil {
		t.Errorf("empty Problems.Err() = %v, want nil", p.Err())
	}
	p.Addf("db-port", "must be positive (got %d)", -1)
	var other config.Problems
	other.Addf("log-format", "must be json or text")
	p.Merge(other.Err())
	p.Merge(nil)
	want := "invalid configuration:\n  --db-port: must be positive (got -1)\n  --log-format: must be json or text"
	if err := p.Err(); err == nil || err.Error() != want {
		t.Errorf("Problems.Err() = %q, want %q", err, want)
	}
}

// TestProblemsMerge checks that Merge takes the problems of a validation
// error as they were recorded, however they read and however wrapped, and
// any other error as one problem.
func TestProblemsMerge(t *testing.T) {
	t.Parallel()
	var other config.Problems
	other.Addf("hub-kubeconfig", "unreadable:\n  open /nope: no such file")
	other.Addf("log-level", "must be debug, info, warn or error")
	var p config.Problems
	p.Merge(fmt.Errorf("component: %w", other.Err()))
	p.Merge(errors.New("invalid configuration:\n  not split"))
	want := []string{
		"--hub-kubeconfig: unreadable:\n  open /nope: no such file",
		"--log-level: must be debug, info, warn or error",
		"invalid configuration:\n  not split",
	}
	ve, ok := errors.AsType[*config.ValidationError](p.Err())
	if !ok {
		t.Fatalf("Problems.Err() = %#v, want a *config.ValidationError", p.Err())
	}
	if !slices.Equal(ve.Problems, want) {
		t.Errorf("Merge(...) problems = %q, want %q", ve.Problems, want)
	}
}

// TestLogNewLogger checks that a logger is made at the level asked for, and
// that a level Validate rejects logs at info and says so.
func TestLogNewLogger(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	o := config.Log{Format: "text", Level: "warn"}
	logger := o.NewLogger(&out, "svc")
	logger.Info("dropped")
	logger.Warn("kept")
	if got := out.String(); strings.Contains(got, "dropped") || !strings.Contains(got, "msg=kept service=svc") {
		t.Errorf("NewLogger(%+v) wrote %q, want only the warning, with the service", o, got)
	}
	out.Reset()
	o.Level = "loud"
	o.NewLogger(&out, "svc").Debug("dropped")
	if got := out.String(); strings.Contains(got, "dropped") || !strings.Contains(got, `level=WARN msg="--log-level not understood, logging at info" service=svc log_level=loud`) {
		t.Errorf("NewLogger(%+v) wrote %q, want a warning naming the level and no debug record", o, got)
	}
}

// TestHumanDuration: four significant digits below a minute, whole seconds
// from a minute on, small durations untouched.
func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                         "0s",
		999 * time.Nanosecond:                     "999ns",
		250_123 * time.Nanosecond:                 "250.1µs",
		12_345_678 * time.Nanosecond:              "12.35ms",
		250 * time.Millisecond:                    "250ms",
		1_534_567_890 * time.Nanosecond:           "1.535s",
		-1_534_567_890 * time.Nanosecond:          "-1.535s",
		59_994 * time.Millisecond:                 "59.99s",
		2*time.Minute + 5_400*time.Millisecond:    "2m5s",
		3*time.Hour + 2*time.Minute + time.Second: "3h2m1s",
	} {
		if got := config.HumanDuration(d); got != want {
			t.Errorf("HumanDuration(%d) = %q, want %q", d, got, want)
		}
	}
}

// TestLogWritesDurationsForAReader: both formats write a duration as its
// HumanDuration, in a group too, where the JSON handler alone would write
// nanoseconds; other attributes are untouched.
func TestLogWritesDurationsForAReader(t *testing.T) {
	t.Parallel()
	elapsed := 1_534_567_890 * time.Nanosecond
	var out strings.Builder
	config.Log{Format: "json", Level: "info"}.NewLogger(&out, "svc").
		Info("done", "elapsed", elapsed, slog.Group("pass", slog.Duration("took", 250*time.Millisecond)), "rows", 7)
	var line map[string]any
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil {
		t.Fatalf("json log line %q: %v", out.String(), err)
	}
	pass, _ := line["pass"].(map[string]any)
	if line["elapsed"] != "1.535s" || pass["took"] != "250ms" || line["rows"] != float64(7) || line["service"] != "svc" {
		t.Errorf("json log line = %v, want elapsed 1.535s, pass.took 250ms, rows 7, service svc", line)
	}
	out.Reset()
	config.Log{Format: "text", Level: "info"}.NewLogger(&out, "svc").Info("done", "elapsed", elapsed)
	if !strings.Contains(out.String(), "elapsed=1.535s") {
		t.Errorf("text log line = %q, want elapsed=1.535s", out.String())
	}
}
