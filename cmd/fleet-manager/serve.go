package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/goava/di"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/dnsprovider"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
	"github.com/fleetmanager/fleet-manager/internal/rest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/internal/stack"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/usermetrics"
	"github.com/fleetmanager/fleet-manager/internal/version"
)

// serveOptions is the whole configuration of `serve`.
type serveOptions struct {
	Log            config.Log
	DB             dbOptions
	Replica        readreplica.Config
	Auth           auth.Config
	Authz          authz.Config
	HTTP           rest.Config
	Secrets        secrets.Config
	Store          postgres.StoreConfig
	Queue          postgres.QueueConfig
	Reconcile      reconcile.Config
	OCM            syncset.OCMConfig
	Hive           syncset.HiveConfig
	UserMetrics    usermetrics.Config
	DNS            dnsprovider.Config
	MigrateOnStart bool
}

func defaultServeOptions() serveOptions {
	return serveOptions{
		Log:         config.DefaultLog(),
		DB:          defaultDBOptions("serve"),
		Replica:     readreplica.DefaultConfig(),
		Auth:        auth.DefaultConfig(),
		Authz:       authz.DefaultConfig(),
		HTTP:        rest.DefaultConfig(),
		Secrets:     secrets.DefaultConfig(),
		Store:       postgres.DefaultStoreConfig(),
		Queue:       postgres.DefaultQueueConfig(),
		Reconcile:   reconcile.DefaultConfig(),
		OCM:         syncset.DefaultOCMConfig(),
		Hive:        syncset.DefaultHiveConfig(),
		UserMetrics: usermetrics.DefaultConfig(),
		DNS:         dnsprovider.DefaultConfig(),
	}
}

func (o *serveOptions) validate() error {
	return joinProblems(
		o.Log.Validate, o.DB.Validate, o.Replica.Validate, o.Auth.Validate, o.Authz.Validate, o.HTTP.Validate, o.Secrets.Validate,
		o.Store.Validate, o.Queue.Validate, o.Reconcile.Validate, o.OCM.Validate, o.Hive.Validate, o.UserMetrics.Validate,
		o.DNS.Validate, o.validateUserMetricsTimeout,
	)
}

// defaultDNSOwner names the deployment in the DNS ownership records by its
// service name, which a fork sets, unless --dns-owner-id names it.
func (o *serveOptions) defaultDNSOwner() {
	if o.DNS.OwnerID == "" {
		o.DNS.OwnerID = o.HTTP.ServiceName
	}
}

// validateUserMetricsTimeout keeps a backend request within the request's
// deadline, so a slow backend answers 503 from the proxy, not a cut reply.
// Without a backend the timeout is unused.
func (o *serveOptions) validateUserMetricsTimeout() error {
	var p config.Problems
	if o.UserMetrics.BackendURL != "" && o.UserMetrics.BackendTimeout >= o.HTTP.RequestTimeout {
		p.Addf("user-metrics-backend-timeout", "must be below --api-request-timeout %s (got %s)", o.HTTP.RequestTimeout, o.UserMetrics.BackendTimeout)
	}
	return p.Err()
}

func newServeCommand(env lookupEnv) *cobra.Command {
	opts := defaultServeOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API, health and metrics endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := complete(cmd.Flags(), env, &opts.DB.SecretsDir); err != nil {
				return err
			}
			opts.defaultDNSOwner()
			if err := opts.validate(); err != nil {
				return err
			}
			// The API turns tokens into subjects with the org roles of --authz-org-*-roles.
			opts.HTTP.OrgRoles = opts.Authz.OrgRoles
			logger := newLogger(cmd, opts.Log, opts.HTTP.ServiceName)
			return serve(cmd.Context(), opts, logger)
		},
	}
	opts.Log.AddFlags(cmd.Flags())
	opts.DB.addFlags(cmd.Flags())
	opts.Replica.AddFlags(cmd.Flags())
	opts.Auth.AddFlags(cmd.Flags())
	opts.Authz.AddFlags(cmd.Flags())
	opts.HTTP.AddFlags(cmd.Flags())
	opts.Secrets.AddFlags(cmd.Flags())
	opts.Store.AddFlags(cmd.Flags())
	opts.Queue.AddFlags(cmd.Flags())
	opts.Reconcile.AddFlags(cmd.Flags())
	opts.OCM.AddFlags(cmd.Flags())
	opts.Hive.AddFlags(cmd.Flags())
	opts.UserMetrics.AddFlags(cmd.Flags())
	opts.DNS.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&opts.MigrateOnStart, "migrate-on-start", false, "apply pending migrations before serving")
	return cmd
}

// serve wires the components with goava/di and runs the servers and the
// reconcilers until ctx ends.
func serve(ctx context.Context, opts serveOptions, logger *slog.Logger) error {
	// A stop while starting cuts the start's database calls short: that is
	// the stop asked for, not a failure.
	starting := func(err error) error {
		if err != nil && ctx.Err() != nil {
			logger.Info("stopped while starting", "cause", err.Error())
			return nil
		}
		return err
	}
	// What the replica does outside a request or a reconciler (its start)
	// names this operation in the database; those name their own.
	ctx = fleet.NewContextWithOperation(ctx, "serve")
	c, err := di.New(
		di.ProvideValue(logger),
		di.ProvideValue(opts.DB.Config),
		di.ProvideValue(opts.Replica),
		di.ProvideValue(opts.Auth),
		di.ProvideValue(opts.HTTP),
		di.ProvideValue(opts.Secrets),
		di.ProvideValue(fleet.SystemClock{}, di.As(new(fleet.Clock))),
		di.Provide(openDB),
		di.Provide(secrets.LoadKeyring),
		di.Provide(newReplica),
		di.Provide(newRegistry),
		di.Provide(func(reg *prometheus.Registry) prometheus.Registerer { return reg }),
		di.Provide(func(cfg rest.Config, reg prometheus.Registerer) (*syncset.Metrics, error) {
			return syncset.NewMetrics(cfg.MetricsNamespace(), reg)
		}),
		di.Provide(func(cfg auth.Config, l *slog.Logger) (*auth.Verifier, func(), error) {
			v, err := auth.NewVerifier(ctx, cfg, l.With("component", "auth"), &http.Client{})
			if err != nil {
				return nil, noCleanup, err
			}
			return v, v.Close, nil
		}),
		di.Provide(func(db *postgres.DB, keyring *secrets.Keyring, verifier *auth.Verifier, replica *readreplica.Replica,
			reg prometheus.Registerer, m *syncset.Metrics, l *slog.Logger) (*stack.Stack, func(), error) {
			s, err := stack.New(ctx, opts.stackConfig(), stack.Parts{
				DB: db, Keyring: keyring, Authenticator: verifier, Logger: l, Registerer: reg, Replica: replica,
				Deliveries: func(store *postgres.Store) (map[fleet.DeliveryMode]fleet.Delivery, error) {
					return newDeliveries(opts, store, m, l), nil
				},
			})
			if err != nil {
				return nil, noCleanup, err
			}
			return s, s.Stop, nil
		}),
	)
	if err != nil {
		return starting(fmt.Errorf("serve: wiring: %w", err))
	}
	defer c.Cleanup()
	var db *postgres.DB
	if err := c.Resolve(&db); err != nil {
		return starting(fmt.Errorf("serve: %w", err))
	}
	if err := checkSchema(ctx, db, opts.MigrateOnStart, logger); err != nil {
		return starting(err)
	}
	if err := checkMasterKeys(ctx, c, opts.Secrets); err != nil {
		return starting(err)
	}
	var svc *stack.Stack
	var registry *prometheus.Registry
	for _, target := range []any{&svc, &registry} {
		if err := c.Resolve(target); err != nil {
			return starting(fmt.Errorf("serve: %w", err))
		}
	}
	if err := svc.Store.SyncCountedLabels(ctx, opts.Store.CountedLabels); err != nil {
		return starting(fmt.Errorf("serve: --inventory-counted-labels: %w", err))
	}
	moved, err := svc.Store.SyncPolicyDelivery(ctx)
	if moved > 0 {
		logger.Info("policy delivery changed; hubs' desired sets moved", "namespace", opts.Store.Policies.Namespace,
			"cluster_set", opts.Store.Policies.ClusterSet, "hubs", moved)
	}
	if err != nil {
		return starting(fmt.Errorf("serve: --policy-namespace, --policy-cluster-set: %w", err))
	}
	// Bound before anything starts: a port in use is then the only error,
	// not the last one after the reconcilers' passes were cut short.
	bound, err := bindServers(opts.HTTP, logger, svc.API, db, registry)
	if err != nil {
		return starting(err)
	}
	if err := svc.Start(ctx); err != nil {
		for _, b := range bound {
			_ = b.Close()
		}
		return starting(fmt.Errorf("serve: %w", err))
	}
	// The listener, the watches and the reconcilers outlive the servers'
	// graceful shutdown and are stopped after it.
	err = runServers(ctx, opts.HTTP, logger, bound)
	svc.Stop()
	return err
}

// stackConfig is the part of the options the stack is built from.
func (o serveOptions) stackConfig() stack.Config {
	return stack.Config{
		DB: o.DB.Config, Store: o.Store, Queue: o.Queue, HTTP: o.HTTP, Authz: o.Authz, UserMetrics: o.UserMetrics,
		DNS: o.DNS, Reconcile: o.Reconcile,
	}
}

// newDeliveries returns the Delivery of each delivery mode.
func newDeliveries(opts serveOptions, store *postgres.Store, m *syncset.Metrics, l *slog.Logger) map[fleet.DeliveryMode]fleet.Delivery {
	return map[fleet.DeliveryMode]fleet.Delivery{
		fleet.DeliveryAgent:       postgres.NewAgentDelivery(store),
		fleet.DeliverySyncSetOCM:  syncset.NewOCMDelivery(opts.OCM, store.HubStore, m, l.With("component", "syncset-ocm")),
		fleet.DeliverySyncSetHive: syncset.NewHiveDelivery(opts.Hive, store.HubStore, m, l.With("component", "syncset-hive")),
	}
}

// checkSchema migrates when asked to, then refuses a schema older than the binary.
func checkSchema(ctx context.Context, db *postgres.DB, migrate bool, logger *slog.Logger) error {
	if migrate {
		if err := db.Migrate(ctx); err != nil {
			return fmt.Errorf("serve: --migrate-on-start: %w", err)
		}
	}
	status, err := db.SchemaStatus(ctx)
	if err != nil {
		return fmt.Errorf("serve: checking the schema: %w", err)
	}
	if !status.Current() {
		return fmt.Errorf("serve: %w", status.Err())
	}
	if len(status.Unknown) > 0 {
		logger.Warn("database schema is newer than this binary", "unknown_migrations", status.Unknown)
	}
	return nil
}

// bindServers opens the sockets of the API, metrics and health servers; an
// address in use fails with the flag that set it.
func bindServers(cfg rest.Config, logger *slog.Logger, api *rest.Server, db *postgres.DB, registry *prometheus.Registry) ([]httpserve.Bound, error) {
	apiHandler, err := api.Handler()
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	timeouts := cfg.ServerTimeouts()
	apiServer := httpserve.NewHTTPServer(timeouts, apiHandler, logger)
	apiServer.RegisterOnShutdown(api.Drain)
	bound, err := httpserve.Bind(
		httpserve.Listener{Name: "api", Address: cfg.APIBindAddress, Flag: "api-bind-address", Server: apiServer},
		httpserve.Listener{Name: "metrics", Address: cfg.MetricsBindAddress, Flag: "metrics-bind-address",
			Server: httpserve.NewHTTPServer(timeouts, httpserve.NewMetricsHandler(registry, cfg.MetricsPprof), logger)},
		httpserve.Listener{Name: "health", Address: cfg.HealthBindAddress, Flag: "health-bind-address",
			Server: httpserve.NewHTTPServer(timeouts, httpserve.NewHealthHandler(db, cfg.ReadyTimeout, httpserve.WithHealthLog(logger.With("component", "health"))), logger)},
	)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return bound, nil
}

// runServers serves the bound servers until ctx ends, then shuts them down.
func runServers(ctx context.Context, cfg rest.Config, logger *slog.Logger, bound []httpserve.Bound) error {
	logger.Info("serving", "version", version.Version, "commit", version.Commit, "base_path", cfg.BasePath, "pid", os.Getpid())
	if err := httpserve.Serve(ctx, logger, cfg.ShutdownTimeout, bound...); err != nil {
		return err
	}
	logger.Info("shutdown complete")
	return nil
}

// noCleanup is what a failed constructor returns: goava/di registers a
// constructor's cleanup even when it fails, and calls it at Cleanup.
func noCleanup() {}

// openDB opens the pool; the container closes it last, after the servers stopped.
func openDB(cfg postgres.Config, logger *slog.Logger) (*postgres.DB, func(), error) {
	db, err := postgres.Open(cfg, logger)
	if err != nil {
		return nil, noCleanup, err
	}
	return db, func() { _ = db.Close() }, nil
}

// newReplica opens the read replica's pool, when --db-read-replica-host
// names one, and registers its metrics; the container closes it.
func newReplica(cfg readreplica.Config, dbCfg postgres.Config, db *postgres.DB, clock fleet.Clock, logger *slog.Logger,
	http rest.Config, reg prometheus.Registerer) (*readreplica.Replica, func(), error) {
	r, err := readreplica.New(cfg, dbCfg, db, clock, logger, http.MetricsNamespace(), reg)
	if err != nil {
		return nil, noCleanup, err
	}
	return r, func() { _ = r.Close() }, nil
}

// newRegistry returns the metrics registry with the build's, the Go runtime,
// process and database pool collectors.
func newRegistry(db *postgres.DB, http rest.Config) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		httpserve.NewBuildInfo(http.MetricsNamespace()),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(db.SQL(), db.Name()),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// checkMasterKeys loads the master keys, so that a missing or bad key file
// is reported as such, and refuses a database whose stored secrets are
// sealed under a master key that neither --encryption-key-file nor
// --encryption-old-key-files holds: one restored without its key, or
// another deployment's. Started anyway, the service could open none of them.
func checkMasterKeys(ctx context.Context, c *di.Container, cfg secrets.Config) error {
	// Loaded here first for an error that names the file and nothing else.
	if _, err := secrets.LoadKeyring(cfg); err != nil {
		return fmt.Errorf("serve: --encryption-key-file: %w", err)
	}
	return c.Invoke(func(svc *stack.Stack, keyring *secrets.Keyring) error {
		unknown, err := svc.Store.UnknownMasterKeys(ctx)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if len(unknown) > 0 {
			return fmt.Errorf("serve: --encryption-key-file, --encryption-old-key-files: the database holds secrets sealed under master key %s, "+
				"which these files do not hold (the current key is %s): start with the master key of the deployment that sealed them",
				strings.Join(unknown, ", "), keyring.PrimaryKeyID())
		}
		return nil
	})
}
