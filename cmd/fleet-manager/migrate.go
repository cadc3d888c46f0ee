package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

func newMigrateCommand(env lookupEnv) *cobra.Command {
	logOpts, dbOpts, service := config.DefaultLog(), defaultDBOptions("migrate"), defaultServiceName()
	// A migration may rewrite a large table: no statement bound unless asked.
	dbOpts.StatementTimeout = 0
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations",
		Long: "Apply every pending migration, holding an advisory lock so replicas started together " +
			"migrate one at a time. Run it before `serve` (the OpenShift template runs it as an init container).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := complete(cmd.Flags(), env, &dbOpts.SecretsDir); err != nil {
				return err
			}
			if err := joinProblems(logOpts.Validate, service.Validate, dbOpts.Validate); err != nil {
				return err
			}
			logger := newLogger(cmd, logOpts, string(service))
			db, err := postgres.Open(dbOpts.Config, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			ctx := fleet.NewContextWithOperation(cmd.Context(), "migrate")
			start := time.Now()
			if err := db.Migrate(ctx); err != nil {
				return err
			}
			status, err := db.SchemaStatus(ctx)
			if err != nil {
				return err
			}
			logger.Info("migrations applied", "applied", len(status.Applied), "latest", status.Applied[len(status.Applied)-1],
				"elapsed", time.Since(start))
			fmt.Fprintf(cmd.OutOrStdout(), "schema current: %d migrations applied\n", len(status.Applied))
			return nil
		},
	}
	logOpts.AddFlags(cmd.Flags())
	service.addFlags(cmd.Flags())
	dbOpts.addFlags(cmd.Flags())
	return cmd
}
