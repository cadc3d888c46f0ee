package rest_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// startInventoryWatch runs a listener and the change feed's inventory watch
// on the database until t ends.
func startInventoryWatch(t testing.TB, cfg postgres.Config) *postgres.InventoryWatch {
	t.Helper()
	listener := postgres.NewListener(cfg, slog.New(slog.DiscardHandler), postgres.ChannelInventory)
	watch := postgres.NewInventoryWatch(listener)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { listener.Run(ctx); done <- struct{}{} }()
	go func() { watch.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return watch
}
