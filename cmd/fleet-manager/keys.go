package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/keyrotation"
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
	batch, reencrypt, every := 100, false, 10*time.Second
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
				if every < 0 {
					p.Addf("progress-interval", "must not be negative (got %s)", every)
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
			done := "re-wrapped"
			if reencrypt {
				done = "re-encrypted"
			}
			start := time.Now()
			progress := &rotationLog{logger: logger, every: every, now: time.Now}
			n, err := keyrotation.New(db, keyring).RotateSecrets(fleet.NewContextWithOperation(cmd.Context(), "rotate_keys"),
				keyrotation.Rotation{Reencrypt: reencrypt, Batch: batch, Progress: progress.report})
			if err != nil {
				logger.Error("rotate-keys stopped", "rotated", n, "elapsed", time.Since(start), "error", err)
				return err
			}
			logger.Info("rotate-keys finished", "rotated", n, "how", done, "key_id", keyring.PrimaryKeyID(), "elapsed", time.Since(start))
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d secrets under key %s\n", done, n, keyring.PrimaryKeyID())
			return nil
		},
	}
	logOpts.AddFlags(cmd.Flags())
	service.addFlags(cmd.Flags())
	dbOpts.addFlags(cmd.Flags())
	keyOpts.AddFlags(cmd.Flags())
	cmd.Flags().IntVar(&batch, "batch-size", batch, "rows re-wrapped per query, or re-encrypted per transaction")
	cmd.Flags().DurationVar(&every, "progress-interval", every, "how often a column's progress is logged (0: after every batch); its start and end always are")
	cmd.Flags().BoolVar(&reencrypt, "reencrypt", reencrypt, "re-encrypt each value under a fresh data key instead of re-wrapping its data key (after a key leak)")
	return cmd
}

// rotationLog logs a rotation's progress: each sealed column with values
// to rotate when it starts and when it ends, and between, after a batch, at
// most once every interval.
type rotationLog struct {
	logger *slog.Logger
	every  time.Duration
	now    func() time.Time
	// started is when the column began, last when progress was logged.
	started, last time.Time
}

func (l *rotationLog) report(p keyrotation.Progress) {
	now := l.now()
	switch {
	case p.Done == 0 && !p.Finished:
		l.started, l.last = now, now
		if p.Total > 0 {
			l.logger.Info("rotating a column", "table", p.Table, "column", p.Column, "total", p.Total)
		}
	case p.Finished:
		if p.Total > 0 || p.Done > 0 {
			l.logger.Info("column rotated", "table", p.Table, "column", p.Column, "done", p.Done, "elapsed", now.Sub(l.started))
		}
	case now.Sub(l.last) >= l.every:
		l.last = now
		l.logger.Info("rotating a column: progress", "table", p.Table, "column", p.Column, "done", p.Done, "of", p.Total,
			"elapsed", now.Sub(l.started))
	}
}
