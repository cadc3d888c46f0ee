// Command fleetshard-sync is the agent of one RHACM hub: `run` long-polls the
// fleet manager for the hub's desired set and applies it, reports the hub's
// heartbeat, ManagedCluster inventory and registration status, and serves
// health and metrics; `version` prints the build. Every flag may also be set
// by its FLEETSHARD_SYNC_ environment variable (--hub-id is
// FLEETSHARD_SYNC_HUB_ID); a flag on the command line wins.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// envPrefix prefixes the environment variable of every flag.
const envPrefix = "FLEETSHARD_SYNC_"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr, os.LookupEnv).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// lookupEnv is os.LookupEnv, or a map in tests.
type lookupEnv func(string) (string, bool)

func newRootCommand(stdout, stderr io.Writer, env lookupEnv) *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetshard-sync",
		Short:         "fleetshard-sync: the Fleet Manager agent of an RHACM hub",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(env), newVersionCommand())
	return root
}
