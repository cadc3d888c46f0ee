// Command fleet-manager is the Fleet Manager service: `serve` runs the API,
// health and metrics servers and the reconcilers; `migrate` applies database
// migrations; `token` mints development tokens; `generate-key` and
// `rotate-keys` manage the master key of stored secrets; `doctor` reports the
// database's health; `version` prints the build.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// envPrefix prefixes the environment variable of every flag: --db-host is
// FLEET_MANAGER_DB_HOST.
const envPrefix = "FLEET_MANAGER_"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr, os.LookupEnv).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 1, or the code an error asks for (doctor's problems).
func exitCode(err error) int {
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 1
}

// lookupEnv is os.LookupEnv, or a map in tests.
type lookupEnv func(string) (string, bool)

func newRootCommand(stdout, stderr io.Writer, env lookupEnv) *cobra.Command {
	root := &cobra.Command{
		Use:           "fleet-manager",
		Short:         "Fleet Manager: the inventory of a fleet of clusters across RHACM hubs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newServeCommand(env),
		newMigrateCommand(env),
		newTokenCommand(env),
		newGenerateKeyCommand(),
		newRotateKeysCommand(env),
		newDoctorCommand(env),
		newVersionCommand(),
	)
	return root
}
