package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "fleetshard-sync %s (commit %s, %s)\n", version.Version, version.Commit, runtime.Version())
		},
	}
}
