package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

func newGenerateKeyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "generate-key FILE",
		Short: "Write a new random master key for --encryption-key-file (mode 0600; never overwrites)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := secrets.GenerateKeyFile(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a new master key to %s\n", args[0])
			return nil
		},
	}
}

func newRotateKeysCommand(env lookupEnv) *cobra.Command {
	logOpts, dbOpts, keyOpts, service := config.DefaultLog(), defaultDBOptions("rotate-keys"), secrets.DefaultConfig(), defaultServiceName()
	batch, reencrypt := 100, false
	cmd := &cobra.Command{
		Use:   "rotate-keys",
		Short: "Re-wrap (or, with --reencrypt, re-encrypt) every stored secret under the current master key",
		Long: "Re-wrap every stored secret whose data key is wrapped by a retired master key (--encryption-old-key-files) " +
			"under the current one (--encryption-key-file). With --reencrypt, open each such value and seal it again under a " +
			"fresh data key, so that a retired key with an old copy of the database no longer opens what is stored. Safe to run " +
			"beside serve, and to run again after an interruption; once it reports zero left, the old key files can be removed " +
			"from the configuration.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := complete(cmd.Flags(), env, &dbOpts.SecretsDir); err != nil {
				return err
			}
			batchValid := func() error {
				var p config.Problems
				if batch < 1 {
					p.Addf("batch-size", "must be at least 1 (got %d)", batch)
				}
				return p.Err()
			}
			if err := joinProblems(logOpts.Validate, service.Validate, dbOpts.Validate, keyOpts.Validate, batchValid); err != nil {
				return err
			}
			keyring, err := secrets.LoadKeyring(keyOpts)
			if err != nil {
				return err
			}
			logger := newLogger(cmd, logOpts, string(service))
			db, err := postgres.Open(dbOpts.Config, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			store := postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
			rotate, done := store.RewrapSecrets, "re-wrapped"
			if reencrypt {
				rotate, done = store.ReencryptSecrets, "re-encrypted"
			}
			n, err := rotate(fleet.NewContextWithOperation(cmd.Context(), "rotate_keys"), batch)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d secrets under key %s\n", done, n, keyring.PrimaryKeyID())
			return nil
		},
	}
	logOpts.AddFlags(cmd.Flags())
	service.addFlags(cmd.Flags())
	dbOpts.addFlags(cmd.Flags())
	keyOpts.AddFlags(cmd.Flags())
	cmd.Flags().IntVar(&batch, "batch-size", batch, "rows re-wrapped per query, or re-encrypted per transaction")
	cmd.Flags().BoolVar(&reencrypt, "reencrypt", reencrypt, "re-encrypt each value under a fresh data key instead of re-wrapping its data key (after a key leak)")
	return cmd
}
