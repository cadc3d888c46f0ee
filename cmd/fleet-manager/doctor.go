package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/doctor"
)

// exitProblems is the exit code of a doctor that found problems; a doctor
// that could not run exits 1, as every failed command does.
const exitProblems = 2

// problemsFound is the doctor's error when a check found a problem.
type problemsFound struct{ n int }

func (e problemsFound) Error() string { return fmt.Sprintf("doctor found %d problems", e.n) }

// ExitCode is the process's exit code for the error (main).
func (e problemsFound) ExitCode() int { return exitProblems }

func newDoctorCommand(env lookupEnv) *cobra.Command {
	logOpts, dbOpts, thresholds, service := config.DefaultLog(), defaultDBOptions("doctor"), doctor.DefaultConfig(), defaultServiceName()
	// The doctor must answer while a migration or a stuck session holds a
	// lock: a check that would wait fails instead, and says so.
	dbOpts.LockTimeout = 5 * time.Second
	// No statement or idle-in-transaction timeout of its own, unless asked:
	// the settings check reads the ones the server gives the role.
	dbOpts.StatementTimeout, dbOpts.IdleInTransactionTimeout = 0, 0
	dbOpts.MaxOpenConns, dbOpts.MaxIdleConns = 2, 2
	output := "text"
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report the database's health: schema, connections, locks, bloat, replication, queue, slow statements",
		Long: "Read PostgreSQL's views and the service's tables and report, section by section, the migrations applied, " +
			"the connections by application_name against max_connections, long transactions, lock waits (who blocks whom), " +
			"table and index sizes with dead rows and vacuum times, replication lag, the work queue's depth and oldest due item, " +
			"and the costliest statements of pg_stat_statements. Exits 2 when a check finds a problem past its threshold, " +
			"1 when the database cannot be asked. docs/operations-database.md says what to do about each.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := complete(cmd.Flags(), env, &dbOpts.SecretsDir); err != nil {
				return err
			}
			outputValid := func() error {
				var p config.Problems
				if output != "text" && output != "json" {
					p.Addf("output", "must be text or json (got %q)", output)
				}
				return p.Err()
			}
			if err := joinProblems(logOpts.Validate, service.Validate, dbOpts.Validate, thresholds.Validate, outputValid); err != nil {
				return err
			}
			logger := newLogger(cmd, logOpts, string(service))
			db, err := postgres.Open(dbOpts.Config, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			start := time.Now()
			report, err := doctor.Run(fleet.NewContextWithOperation(cmd.Context(), "doctor"), db, thresholds)
			if err != nil {
				return err
			}
			logger.Info("database checked", "database", report.Database, "problems", len(report.Problems()), "elapsed", time.Since(start))
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(jsonReport{Report: report, Problems: report.Problems()}); err != nil {
					return fmt.Errorf("doctor: writing the report: %w", err)
				}
			} else if err := writeReport(cmd.OutOrStdout(), report); err != nil {
				return fmt.Errorf("doctor: writing the report: %w", err)
			}
			if n := len(report.Problems()); n > 0 {
				return problemsFound{n}
			}
			return nil
		},
	}
	logOpts.AddFlags(cmd.Flags())
	service.addFlags(cmd.Flags())
	dbOpts.addFlags(cmd.Flags())
	thresholds.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&output, "output", output, "report format: text or json")
	return cmd
}

// jsonReport is the report with every problem listed at its top, for a
// machine that only asks whether there is one.
type jsonReport struct {
	doctor.Report
	Problems []doctor.Finding `json:"problems"`
}

// writeReport writes the report for a reader: each section's findings, its
// problems marked, and a summary.
func writeReport(w io.Writer, r doctor.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	p("database %s, PostgreSQL %s, checked %s", r.Database, r.ServerVersion, r.CheckedAt.Format(time.RFC3339))

	section(p, "Schema", r.Schema.Check)
	p("  state %s: %d of %d known migrations applied, latest %s", r.Schema.State, r.Schema.Applied, r.Schema.Known, r.Schema.Latest)
	if len(r.Schema.Unknown) > 0 {
		p("  applied by a newer binary: %s", strings.Join(r.Schema.Unknown, ", "))
	}

	st := r.Settings
	section(p, "Settings", st.Check)
	p("  autovacuum %s, track_counts %s, statement_timeout %s, idle_in_transaction_session_timeout %s, idle_session_timeout %s",
		onOff(st.Autovacuum), onOff(st.TrackCounts), seconds(st.StatementTimeoutSeconds), seconds(st.IdleInTransactionSessionTimeoutSeconds),
		seconds(st.IdleSessionTimeoutSeconds))

	c := r.Connections
	section(p, "Connections", c.Check)
	p("  %d in use of max_connections %d (%d reserved): %.0f%%", c.Used, c.Max, c.Reserved, c.Use*100)
	p("  APPLICATION\tDATABASE\tSTATE\tCOUNT")
	for _, g := range c.ByApplication {
		p("  %s\t%s\t%s\t%d", g.ApplicationName, g.Database, g.State, g.Count)
	}

	section(p, "Long transactions", r.Transactions.Check)
	p("  open longer than %s: %d", seconds(r.Transactions.ThresholdSeconds), len(r.Transactions.Long))
	for _, s := range r.Transactions.Long {
		p("  pid %d\t%s\t%s\tfor %s\t%s", s.PID, s.ApplicationName, s.State, seconds(s.XactSeconds), oneLine(s.Query))
	}

	section(p, "Lock waits", r.LockWaits.Check)
	p("  waiting sessions: %d", len(r.LockWaits.Waits))
	for _, l := range r.LockWaits.Waits {
		p("  pid %d (%s) waits %s on %s: %s", l.Waiting.PID, l.Waiting.ApplicationName, seconds(l.Waiting.QuerySeconds), l.Waiting.WaitEvent, oneLine(l.Waiting.Query))
		p("    blocked by pid %d (%s, %s, transaction %s): %s", l.Blocking.PID, l.Blocking.ApplicationName, l.Blocking.State,
			seconds(l.Blocking.XactSeconds), oneLine(l.Blocking.Query))
	}

	t := r.Tables
	section(p, "Tables and indexes", t.Check)
	p("  database size %s; largest tables:", size(t.DatabaseBytes))
	p("  TABLE\tTOTAL\tINDEXES\tLIVE\tDEAD\tDEAD%%\tBLOAT(EST)\tLAST AUTOVACUUM\tLAST AUTOANALYZE")
	for _, s := range t.Tables {
		p("  %s\t%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s", s.Name, size(s.TotalBytes), size(s.IndexBytes), s.LiveTuples, s.DeadTuples,
			s.DeadRatio*100, size(s.EstimatedBloatBytes), stamp(s.LastAutovacuum), stamp(s.LastAutoanalyze))
	}
	p("  largest indexes:")
	p("  INDEX\tTABLE\tSIZE\tSCANS")
	for _, i := range t.Indexes {
		p("  %s\t%s\t%s\t%d", i.Name, i.Table, size(i.Bytes), i.Scans)
	}
	if len(t.Locked) > 0 {
		p("  not measured, held in ACCESS EXCLUSIVE mode: %s", strings.Join(t.Locked, ", "))
	}

	rep := r.Replication
	section(p, "Replication", rep.Check)
	p("  role %s", rep.Role)
	if rep.StandbyReplayLagSeconds != nil {
		p("  replay lag %s", seconds(*rep.StandbyReplayLagSeconds))
	}
	for _, x := range rep.Replicas {
		p("  replica %s\t%s\t%s\t%s\tlag %s", x.ApplicationName, x.ClientAddr, x.State, x.SyncState, optSeconds(x.ReplayLagSeconds))
	}
	for _, s := range rep.Slots {
		p("  slot %s\t%s\tactive=%t\tretains %s", s.Name, s.Type, s.Active, optSize(s.RetainedBytes))
	}

	section(p, "Work queue", r.Queue.Check)
	p("  KIND\tDUE\tCLAIMED\tRETRYING\tOLDEST DUE")
	for _, k := range r.Queue.Kinds {
		p("  %s\t%d\t%d\t%d\t%s", k.Kind, k.Due, k.Claimed, k.Retrying, optSeconds(k.OldestDueSeconds))
	}

	stmts := r.Statements
	section(p, "Statements (pg_stat_statements)", stmts.Check)
	if stmts.Note != "" {
		p("  %s", stmts.Note)
	}
	if len(stmts.Top) > 0 {
		p("  CALLS\tTOTAL\tMEAN\tROWS\tQUERY")
	}
	for _, s := range stmts.Top {
		p("  %d\t%s\t%s\t%d\t%s", s.Calls, seconds(s.TotalSeconds), seconds(s.MeanSeconds), s.Rows, oneLine(s.Query))
	}

	problems := r.Problems()
	p("")
	if len(problems) == 0 {
		p("no problems found")
	} else {
		p("%d problems found", len(problems))
	}
	return tw.Flush()
}

// section writes a section's heading and its problems, each marked.
func section(p func(string, ...any), name string, c doctor.Check) {
	status := "ok"
	if len(c.Problems) > 0 {
		status = "PROBLEM"
	}
	p("\n== %s: %s", name, status)
	for _, pr := range c.Problems {
		p("  ! %s", oneLine(pr))
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

func optSeconds(s *float64) string {
	if s == nil {
		return "-"
	}
	return seconds(*s).String()
}

// size is a number of bytes in binary units.
func size(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func optSize(b *int64) string {
	if b == nil {
		return "-"
	}
	return size(*b)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine is a statement on one line, for a table's cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
