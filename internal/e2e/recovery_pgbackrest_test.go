package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// recoveryStanza is the pgBackRest stanza of the drill's database cluster.
const recoveryStanza = "fleet"

// recoveryRepo is a pgBackRest repository on a local path with its
// configuration, lock and log folders, all owned by the server's user, and
// the operators' script that drives it.
type recoveryRepo struct {
	t      *testing.T
	dir    string // the repository, configuration, locks, logs and the server's socket
	conf   string
	script string
}

func newRecoveryRepo(t *testing.T) *recoveryRepo {
	t.Helper()
	if _, err := exec.LookPath("pgbackrest"); err != nil {
		t.Fatalf("pgbackrest is not installed: run scripts/dbops/ensure-tools.sh (%v)", err)
	}
	script, err := filepath.Abs("../../scripts/dbops/pgbackrest.sh")
	if err != nil {
		t.Fatal(err)
	}
	// A short path: the server's Unix socket, which pgBackRest connects
	// through, lives here too.
	dir, err := os.MkdirTemp("", "fm-pgbr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, pgBackRest runs as the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return &recoveryRepo{t: t, dir: dir, conf: filepath.Join(dir, "pgbackrest.conf"), script: script}
}

// settings are the server settings that archive its WAL into the
// repository, as `pgbackrest.sh settings` prints them for production.
func (r *recoveryRepo) settings() []string {
	return []string{"wal_level=replica", "archive_mode=on",
		fmt.Sprintf("archive_command=pgbackrest --config=%s --stanza=%s archive-push %%p", r.conf, recoveryStanza),
		"unix_socket_directories=" + r.dir}
}

// initServer is the Init of the original server: it writes the
// configuration naming its data directory, then runs initdb.
func (r *recoveryRepo) initServer(s *pgtest.Server, dataDir string) error {
	conf := fmt.Sprintf(`[global]
repo1-path=%[1]s/repo
repo1-retention-full=2
lock-path=%[1]s/lock
log-path=%[1]s/log
log-level-console=warn
log-level-file=off
start-fast=y
compress-type=lz4

[%[2]s]
pg1-path=%[3]s
pg1-socket-path=%[1]s
`, r.dir, recoveryStanza, dataDir)
	if err := os.WriteFile(r.conf, []byte(conf), 0o644); err != nil {
		return err
	}
	if out, err := s.Command("initdb", "-A", "trust", "-U", "postgres", "-N", "-E", "UTF8", "--locale=C", "-D", dataDir).CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// run runs `pgbackrest.sh args...` as the server's user, its configuration
// and stanza from the environment as an operator would set them, and the
// port of s (0: none, as for a restore).
func (r *recoveryRepo) run(s *pgtest.Server, args ...string) (string, error) {
	cmd := s.Command(r.script, args...)
	cmd.Env = append(cmd.Env, "PGBACKREST_CONFIG="+r.conf, "PGBACKREST_STANZA="+recoveryStanza)
	if s.Port() != 0 {
		cmd.Env = append(cmd.Env, "PGBACKREST_PG1_PORT="+strconv.Itoa(s.Port()))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbackrest.sh %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// mustRun is run, failing the test on an error; it returns how long it took.
func (r *recoveryRepo) mustRun(s *pgtest.Server, args ...string) time.Duration {
	r.t.Helper()
	start := time.Now()
	if _, err := r.run(s, args...); err != nil {
		r.t.Fatal(err)
	}
	return time.Since(start)
}

// recoveryQuery runs fn on a connection to db.
func recoveryQuery(t *testing.T, db postgres.Config, fn func(ctx context.Context, conn *pgx.Conn) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.DSN())
	if err != nil {
		t.Fatalf("connecting to %s on port %d: %v", db.Name, db.Port, err)
	}
	defer conn.Close(ctx)
	if err := fn(ctx, conn); err != nil {
		t.Fatal(err)
	}
}

// recoveryChecksums returns, for every table of the public schema, the
// number of its rows and the md5 of their text in a fixed order: equal
// checksums mean equal contents.
func recoveryChecksums(t *testing.T, db postgres.Config) map[string]string {
	t.Helper()
	sums := map[string]string{}
	recoveryQuery(t, db, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
		if err != nil {
			return err
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, table := range tables {
			var n int64
			var sum string
			q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(t::text, E'\n' ORDER BY t::text)), '') FROM public.%s t`,
				pgx.Identifier{table}.Sanitize())
			if err := conn.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
				return fmt.Errorf("checksum of %s: %w", table, err)
			}
			sums[table] = fmt.Sprintf("%d rows %s", n, sum)
		}
		return nil
	})
	if len(sums) == 0 {
		t.Fatalf("no table in the public schema of %s", db.Name)
	}
	return sums
}

// recoveryArchiveNow switches to a new WAL segment and waits until the one it
// closed is archived: everything committed so far is in the repository.
func recoveryArchiveNow(t *testing.T, db postgres.Config) {
	t.Helper()
	var segment string
	recoveryQuery(t, db, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_walfile_name(pg_switch_wal())`).Scan(&segment)
	})
	// Segment names of one timeline order as their positions do.
	gomega.NewWithT(t).Eventually(func() bool {
		var archived string
		recoveryQuery(t, db, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver`).Scan(&archived)
		})
		return archived >= segment
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(gomega.BeTrue(), "WAL segment %s archived", segment)
}

// recoveryWaitPromoted waits until the restored server left recovery.
func recoveryWaitPromoted(t *testing.T, db postgres.Config) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() bool {
		var inRecovery bool
		recoveryQuery(t, db, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery)
		})
		return inRecovery
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(gomega.BeFalse(), "the restored server promoted")
}

// recoveryFleetManager is a fleet manager on db beside orig: the same
// Hydra, development signing key (the tokens minted stay valid) and flags,
// with the master key in keyFile; on orig's ports when samePorts (what
// orig's agents call), else on free ones. It is not started.
func recoveryFleetManager(t *testing.T, orig *fleetManager, db postgres.Config, keyFile string, samePorts bool) *fleetManager {
	t.Helper()
	fm := &fleetManager{t: t, db: db, hydra: orig.hydra, keyDir: orig.keyDir, keyFile: keyFile,
		api: orig.api, health: orig.health, metrics: orig.metrics, devKey: orig.devKey, authCfg: orig.authCfg,
		Base: orig.Base, Public: orig.Public, Admin: orig.Admin, extraArg: orig.extraArg}
	if !samePorts {
		fm.api, fm.health, fm.metrics = freePort(t), freePort(t), freePort(t)
		fm.Base = fmt.Sprintf("http://127.0.0.1:%d/api/fleet_manager/v1", fm.api)
		var err error
		if fm.Public, err = public.NewClientWithResponses(fm.Base); err != nil {
			t.Fatal(err)
		}
		if fm.Admin, err = admin.NewClientWithResponses(fm.Base); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(fm.stop)
	return fm
}

// recoveryServeFails runs serve of fm, which must exit with an error within
// a minute, and returns its output.
func recoveryServeFails(t *testing.T, fm *fleetManager) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, fleetManagerBinary, fm.args()...).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("fleet-manager serve with --encryption-key-file=%s: exit %v (context %v), want an error exit; log:\n%s", fm.keyFile, err, ctx.Err(), out)
	}
	return string(out)
}
