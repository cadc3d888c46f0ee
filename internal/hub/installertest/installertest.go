// Package installertest checks install-configs with the OpenShift
// installer's own code, for tests: it runs installer-validator, which
// scripts/installer/build-validator.sh builds from
// github.com/openshift/installer (pkg/types/validation after the installer's
// defaults, as `openshift-install` does before it reaches a cloud). Hive's
// controllers cannot be built here (docs/automated-testing.md), so this, and
// applying what Fleet Manager renders for Hive to a hubtest hub holding Hive's
// CRDs with strict field validation, are the real rules its objects meet.
//
// The binary comes from $INSTALLER_VALIDATOR_BIN, else
// installer-validator/installer-validator in the cache folder
// ($FLEET_MANAGER_CACHE or ~/.cache/fleet-manager), which make test/binaries
// fills.
package installertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// BinEnv names the environment variable that holds the validator's path.
const BinEnv = "INSTALLER_VALIDATOR_BIN"

// FieldError is one error the installer found, as k8s.io's field.Error:
// its type ("FieldValueRequired"), the field's path and the detail.
type FieldError struct {
	Type   string `json:"type"`
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

func (e FieldError) String() string {
	return fmt.Sprintf("%s %s: %s", e.Type, e.Field, e.Detail)
}

// Architectures are an install-config's machine pools' architectures after
// the installer's defaults.
type Architectures struct {
	ControlPlane string   `json:"controlPlane"`
	Compute      []string `json:"compute"`
}

// Result is what the installer says of one install-config.
type Result struct {
	Architectures Architectures `json:"architectures"`
	Errors        []FieldError  `json:"errors"`
}

// Binary returns the validator's path, or an error that says how to build it.
func Binary() (string, error) {
	bin := os.Getenv(BinEnv)
	if bin == "" {
		var err error
		if bin, err = childproc.CachePath("installer-validator", "installer-validator"); err != nil {
			return "", fmt.Errorf("installertest: %w, or %s", err, BinEnv)
		}
	}
	if info, err := os.Stat(bin); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("installertest: no executable %s: run make test/binaries (it builds installer-validator with scripts/installer/build-validator.sh; %s chooses the file)",
			bin, BinEnv)
	}
	return bin, nil
}

// Validate runs the installer's checks on each install-config document and
// returns one result per document, in order.
func Validate(ctx context.Context, docs ...[]byte) ([]Result, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for _, d := range docs {
		in.WriteString("---\n")
		in.Write(d)
		in.WriteString("\n")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &stdout, &stderr
	err = cmd.Run()
	// Exit status 1 means some document has errors; they are on stdout.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return nil, fmt.Errorf("installertest: %s: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	var out []Result
	lines := bufio.NewScanner(&stdout)
	lines.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for lines.Scan() {
		var r Result
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("installertest: %s printed %q: %w", bin, lines.Text(), err)
		}
		out = append(out, r)
	}
	if len(out) != len(docs) {
		return nil, fmt.Errorf("installertest: %s answered for %d documents of %d: %s", bin, len(out), len(docs), strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
