// Command fleetctl is the command line of Fleet Manager: `fleetctl login`
// once, then clusters, inventory, policies, pools, reservations, hubs, and
// `fleetctl get PATH` for anything else. docs/cli.md describes it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetmanager/fleet-manager/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}
