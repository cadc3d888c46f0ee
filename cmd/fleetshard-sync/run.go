package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/internal/version"
)

// The health and metrics servers are small and local: fixed timeouts.
const (
	shutdownTimeout = 10 * time.Second
	readyTimeout    = 2 * time.Second
)

func newRunCommand(env lookupEnv) *cobra.Command {
	opts := defaultRunOptions()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent: apply the hub's desired set, report its inventory, serve health and metrics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := config.BindEnv(cmd.Flags(), envPrefix, env); err != nil {
				return err
			}
			if err := opts.validate(); err != nil {
				return err
			}
			return run(cmd.Context(), opts, opts.Log.NewLogger(cmd.ErrOrStderr(), "fleetshard-sync"))
		},
	}
	opts.addFlags(cmd.Flags())
	return cmd
}

// run wires the agent and serves health and metrics until ctx ends (SIGTERM):
// then the agent's loops stop and the servers drain.
func run(ctx context.Context, opts runOptions, logger *slog.Logger) error {
	// A restart is a new generation: the fleet manager then asks for a resync.
	startGeneration := time.Now().UnixNano()
	// client-go logs through klog (watch errors, throttling): into our log.
	klog.SetSlogLogger(logger.With("component", "client-go"))
	cfg := opts.Agent
	registry := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := registry.Register(c); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	metrics, err := agent.NewMetrics(registry)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	restCfg, err := agent.HubRESTConfig(cfg.Kubeconfig, "fleetshard-sync/"+version.Version)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	hub, err := agent.NewHub(restCfg)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	tokens := agent.NewTokenSource(cfg, agent.NewTokenHTTPClient())
	fc, err := agent.NewFleetClient(cfg.FleetManagerURL, cfg.HubID, agent.NewHTTPClient(cfg, tokens))
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	a := agent.New(cfg, fc, hub, agent.Options{
		Version: version.Version, StartGeneration: startGeneration, Logger: logger, Metrics: metrics, Clock: fleet.SystemClock{},
	})

	serverCfg := rest.DefaultConfig()
	bound, err := rest.Bind(
		rest.Listener{Name: "health", Address: cfg.HealthBindAddress, Server: rest.NewHTTPServer(serverCfg, rest.NewHealthHandler(a, readyTimeout), logger)},
		rest.Listener{Name: "metrics", Address: cfg.MetricsBindAddress, Server: rest.NewHTTPServer(serverCfg, rest.NewMetricsHandler(registry), logger)},
	)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	logger.Info("fleetshard-sync starting", "version", version.Version, "commit", version.Commit, "hub_id", cfg.HubID, "fleet_manager_url", cfg.FleetManagerURL)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	serveErr := rest.Serve(ctx, logger, shutdownTimeout, bound...)
	cancel() // a server that failed stops the agent too
	return errors.Join(serveErr, <-agentDone)
}
