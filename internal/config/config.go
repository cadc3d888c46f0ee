// Package config holds the machinery every component's configuration shares:
// filling flags from the environment and from a secrets directory, and
// collecting validation problems that name the setting at fault. The typed
// configuration structs themselves live with the component they configure.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// EnvName returns the environment variable that sets the flag name:
// prefix + the name upper-cased with dashes turned into underscores.
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// BindEnv sets every flag of fs not given on the command line from its
// environment variable (see EnvName), so flags win over the environment and the
// environment over defaults. lookup is os.LookupEnv outside tests.
func BindEnv(fs *pflag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		env := EnvName(prefix, f.Name)
		if v, ok := lookup(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s (for --%s): %w", env, f.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// SecretFile names a flag that a file of the secrets directory may set.
type SecretFile struct {
	// Flag is the flag's name, e.g. "db-password".
	Flag string
	// File is the file's name inside the secrets directory, e.g. "db.password".
	File string
}

// BindSecrets sets each listed flag that neither the command line nor the
// environment set from its file in dir, when that file exists; its content is
// trimmed of surrounding white space. This is how OpenShift secrets mounted as
// files (db.host, db.password, ...) reach the configuration. A missing file
// is not an error; an unreadable one is.
func BindSecrets(fs *pflag.FlagSet, dir string, files []SecretFile, envSet func(flag string) bool) error {
	if dir == "" {
		return nil
	}
	var errs []error
	for _, sf := range files {
		f := fs.Lookup(sf.Flag)
		if f == nil {
			errs = append(errs, fmt.Errorf("secrets: unknown flag --%s", sf.Flag))
			continue
		}
		if f.Changed || envSet(sf.Flag) {
			continue
		}
		path := filepath.Join(dir, sf.File)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--secrets-dir: reading %s: %w", path, err))
			continue
		}
		if err := fs.Set(sf.Flag, strings.TrimSpace(string(b))); err != nil {
			errs = append(errs, fmt.Errorf("--secrets-dir: %s (for --%s): %w", path, sf.Flag, err))
		}
	}
	return errors.Join(errs...)
}

// Problems collects validation failures, each naming the flag at fault.
type Problems struct {
	list []string
}

// ValidationError is the error of a validation that found problems; each
// problem names the flag at fault ("--db-port: must be positive").
type ValidationError struct {
	Problems []string
}

// Error lists every problem, one a line.
func (e *ValidationError) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// Addf records a problem with the flag named flag.
func (p *Problems) Addf(flag, format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf("--%s: %s", flag, fmt.Sprintf(format, args...)))
}

// Err returns nil when nothing was recorded, otherwise a *ValidationError
// listing every problem.
func (p *Problems) Err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: slices.Clone(p.list)}
}

// Merge appends the problems of another component's validation error: those
// of a *ValidationError it wraps, or else the error itself as one problem.
func (p *Problems) Merge(err error) {
	if err == nil {
		return
	}
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		p.list = append(p.list, ve.Problems...)
		return
	}
	p.list = append(p.list, err.Error())
}
