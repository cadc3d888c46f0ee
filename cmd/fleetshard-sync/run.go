package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/version"
)

// readyTimeout bounds one readiness check; the server is small and local.
const readyTimeout = 2 * time.Second

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
// then the agent's loops stop, it releases the hub's lease, and the servers
// drain, all within --shutdown-timeout; past it, run returns an error rather
// than wait, so that the process exits before the kubelet kills it.
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
	if cfg.LeaseNamespace == "" {
		cfg.LeaseNamespace = agent.HubNamespace(cfg.Kubeconfig)
	}
	host, _ := os.Hostname() // the pod's name: it says who holds the lease
	a := agent.New(cfg, fc, hub, agent.Options{
		Version: version.Version, StartGeneration: startGeneration, Logger: logger, Metrics: metrics, Clock: fleet.SystemClock{},
		Identity: fmt.Sprintf("%s_%d", host, startGeneration),
	})

	timeouts := httpserve.DefaultTimeouts()
	bound, err := httpserve.Bind(
		httpserve.Listener{Name: "health", Address: cfg.HealthBindAddress, Flag: "health-bind-address", Server: httpserve.NewHTTPServer(timeouts, httpserve.NewHealthHandler(a, readyTimeout), logger)},
		httpserve.Listener{Name: "metrics", Address: cfg.MetricsBindAddress, Flag: "metrics-bind-address", Server: httpserve.NewHTTPServer(timeouts, httpserve.NewMetricsHandler(registry, cfg.MetricsPprof), logger)},
	)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	logger.Info("fleetshard-sync starting", "version", version.Version, "commit", version.Commit, "hub_id", cfg.HubID, "fleet_manager_url", cfg.FleetManagerURL)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- httpserve.Serve(ctx, logger, cfg.ShutdownTimeout, bound...) }()
	var errs []error
	select {
	case <-ctx.Done():
	case err := <-serveDone: // a server that failed stops the agent too
		errs, serveDone = append(errs, err), nil
	case err := <-agentDone: // the lease was lost: stop serving too
		errs, agentDone = append(errs, err), nil
	}
	cancel()
	return errors.Join(append(errs, awaitStop(logger, cfg.ShutdownTimeout, agentDone, serveDone))...)
}

// awaitStop waits for the agent and the servers to stop, at most timeout. A
// nil channel is one already stopped.
func awaitStop(logger *slog.Logger, timeout time.Duration, agentDone, serveDone <-chan error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var errs []error
	for agentDone != nil || serveDone != nil {
		select {
		case err := <-agentDone:
			errs, agentDone = append(errs, err), nil
		case err := <-serveDone:
			errs, serveDone = append(errs, err), nil
		case <-deadline.C:
			logger.Error("shutdown did not finish in time, exiting", "shutdown_timeout", timeout,
				"agent_stopped", agentDone == nil, "servers_stopped", serveDone == nil)
			return errors.Join(append(errs, fmt.Errorf("run: not stopped within --shutdown-timeout=%s", timeout))...)
		}
	}
	logger.Info("shutdown complete")
	return errors.Join(errs...)
}
