package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// recoveryStack is the drill's stack: newOwnedDBStack's, on a server that
// archives its WAL into a pgBackRest repository.
func recoveryStack(t *testing.T, repo *recoveryRepo, name string) (*stack, *pgtest.Server) {
	t.Helper()
	server := pgtest.StartServerWith(t, pgtest.ServerOptions{Settings: repo.settings(), Init: repo.initServer})
	repo.mustRun(server, "setup")
	hydra := hydratest.Start(t)
	hub := testHub(t)
	return newStackOn(t, name, hydra, hub, startFleetManagerOn(t, hydra, server.NewDatabase(t, "fleet"))), server
}

// recoveryDB is the drill's database on server.
func recoveryDB(server *pgtest.Server) postgres.Config {
	cfg := server.Config()
	cfg.Name = "fleet"
	return cfg
}

// recoveryRegister registers each name and waits until all are ready.
func (s *stack) recoveryRegister(names ...string) map[string]public.Cluster {
	s.t.Helper()
	out := map[string]public.Cluster{}
	for _, name := range names {
		out[name] = s.register(name)
	}
	for _, c := range out {
		s.waitPhase(c.Id, public.Ready)
	}
	return out
}

// recoveryDeregister deregisters c and waits until it is gone.
func (s *stack) recoveryDeregister(c public.Cluster) {
	s.t.Helper()
	if resp, err := s.fm.Public.DeleteClusterWithResponse(context.Background(), c.Id, bearer(s.user)); err != nil || resp.StatusCode() >= 300 {
		s.t.Fatalf("DeleteCluster(%s) = %v, %v", c.Name, resp.StatusCode(), err)
	}
	s.waitOnHub(managedClusterName(c), false)
	s.waitGone(c.Id)
}

// recoveryNames lists the names of the user's registrations.
func (s *stack) recoveryNames() []string {
	s.t.Helper()
	resp, err := s.fm.Public.ListClustersWithResponse(context.Background(), &public.ListClustersParams{Size: ptr(100)}, bearer(s.user))
	if err != nil || resp.JSON200 == nil {
		s.t.Fatalf("ListClusters() = %v, %v", resp.StatusCode(), err)
	}
	var names []string
	for _, c := range resp.JSON200.Items {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names
}

// recoveryInInventory waits until the inventory has the hub's row name live
// (want true) or not (false).
func (s *stack) recoveryInInventory(name string, want bool, why string) {
	s.t.Helper()
	s.g.Eventually(func() bool { return len(s.inventory(name)) == 1 }).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).
		Should(gomega.Equal(want), "inventory row %s: %s", name, why)
}

// TestPointInTimeRecoveryDrill is the recovery drill of
// docs/database-recovery.md: registrations and an inventory loaded through
// the API and the agent, a full backup with scripts/dbops/pgbackrest.sh,
// more changes, a target time, changes after it; the database restored to
// the target time into a fresh data directory and fleet-manager started on
// it with the master key kept apart from the backup. Every table's checksum
// is the one at the target time, the API shows what was acknowledged before
// it and nothing after; without the key (or with another one) the service
// does not start and says what is wrong; the agent, not restarted, sees the
// hub's revision go back and brings the hub back to the restored database's
// desired set and the inventory back to the hub's truth; restarted, it
// delivers again.
func TestPointInTimeRecoveryDrill(t *testing.T) {
	repo := newRecoveryRepo(t)
	s, server := recoveryStack(t, repo, "hub-e2e-pitr")
	suffix := s.hubID[len(s.hubID)-6:]
	inv := func(tag string) string { return "pitr-inv-" + tag + "-" + suffix }

	// Before the backup: four registrations, three clusters only the hub knows.
	regs := s.recoveryRegister("a0", "a1", "a2", "a3")
	for _, tag := range []string{"a0", "a1", "a2"} {
		createDirect(t, inv(tag))
		s.recoveryInInventory(inv(tag), true, "reported by the agent")
	}
	took := repo.mustRun(server, "backup", "full")
	t.Logf("full backup: %s", took.Round(time.Millisecond))

	// After the backup, before the target time.
	for name, c := range s.recoveryRegister("b0", "b1") {
		regs[name] = c
	}
	s.recoveryDeregister(regs["a0"])
	createDirect(t, inv("b0"))
	s.recoveryInInventory(inv("b0"), true, "reported by the agent")
	deleteDirect(t, inv("a2"))
	s.recoveryInInventory(inv("a2"), false, "tombstoned")

	// The target time, with the service stopped so that the database's
	// state at that time is known exactly.
	s.fm.stop()
	atTarget := recoveryChecksums(t, recoveryDB(server))
	var target string
	recoveryQuery(t, server.Config(), func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT clock_timestamp()::text`).Scan(&target)
	})
	s.fm.start()

	// After the target time.
	for name, c := range s.recoveryRegister("c0", "c1") {
		regs[name] = c
	}
	s.recoveryDeregister(regs["b0"])
	createDirect(t, inv("c0"))
	s.recoveryInInventory(inv("c0"), true, "reported by the agent")
	deleteDirect(t, inv("a1"))
	s.recoveryInInventory(inv("a1"), false, "tombstoned")
	took = repo.mustRun(server, "backup", "incr")
	t.Logf("incremental backup: %s", took.Round(time.Millisecond))

	// The loss: the service stops, and what the last WAL segment holds
	// reaches the repository. The agent runs on, retrying.
	s.fm.stop()
	applied := s.recoveryAppliedRevision(server)
	recoveryArchiveNow(t, server.Config())
	final := recoveryChecksums(t, recoveryDB(server))
	for _, table := range []string{"registrations", "managed_clusters", "hubs"} {
		if final[table] == atTarget[table] {
			t.Errorf("table %s: checksum %s both at the target time and at the end, want the changes after it to show", table, final[table])
		}
	}
	if out, err := repo.run(server, "info", "--output=json"); err != nil || !strings.Contains(out, `"type":"incr"`) {
		t.Errorf("pgbackrest.sh info --output=json = %s, %v; want the full and the incremental backup", out, err)
	}

	// Restore into a fresh data directory.
	start := time.Now()
	restored := pgtest.StartServerWith(t, pgtest.ServerOptions{Init: func(rs *pgtest.Server, dataDir string) error {
		_, err := repo.run(rs, "restore", "--pg1-path="+dataDir, "--target-time="+target)
		return err
	}})
	db := recoveryDB(restored)
	recoveryWaitPromoted(t, restored.Config())
	t.Logf("restore to %s and recovery: %s", target, time.Since(start).Round(time.Millisecond))
	got := recoveryChecksums(t, db)
	for table, want := range atTarget {
		if got[table] != want {
			t.Errorf("restored table %s: checksum %s, want %s as at the target time", table, got[table], want)
		}
	}
	if len(got) != len(atTarget) {
		t.Errorf("restored tables %d, want %d", len(got), len(atTarget))
	}

	// These checks run on ports the agent does not call.
	s.recoveryCheckMasterKey(db)

	// With its key: what was acknowledged before the target time, nothing after.
	orig := s.fm
	s.fm = recoveryFleetManager(t, orig, db, orig.keyFile, false)
	s.fm.start()
	s.recoveryCheckRestored(regs, inv)
	s.fm.stop()

	s.recoveryConverge(orig, db, regs, inv, applied)
}

// recoveryCheckRestored checks through the API, with no agent calling the
// service, that the restored database holds what was acknowledged before the
// target time and nothing after it.
func (s *stack) recoveryCheckRestored(regs map[string]public.Cluster, inv func(string) string) {
	s.t.Helper()
	if names, want := s.recoveryNames(), []string{"a1", "a2", "a3", "b0", "b1"}; strings.Join(names, ",") != strings.Join(want, ",") {
		s.t.Errorf("registrations after the restore = %v, want %v", names, want)
	}
	for _, name := range []string{"a0", "c0", "c1"} {
		if _, code := s.cluster(regs[name].Id); code != http.StatusNotFound {
			s.t.Errorf("GetCluster(%s) after the restore = %d, want 404", name, code)
		}
	}
	if c, _ := s.cluster(regs["b0"].Id); c.Phase != public.Ready {
		s.t.Errorf("b0, deregistered after the target time, is %s after the restore, want ready", describeCluster(c))
	}
	resp, err := s.fm.Public.GetClusterImportWithResponse(context.Background(), regs["a1"].Id, bearer(s.user))
	if err != nil || resp.JSON200 == nil || !strings.Contains(resp.JSON200.Manifests, "import manifests of") {
		s.t.Errorf("GetClusterImport(a1) with the master key = %v %s, %v; want the sealed manifests", resp.StatusCode(), resp.Body, err)
	}
	for tag, want := range map[string]bool{"a0": true, "a1": true, "a2": false, "b0": true, "c0": false} {
		if got := len(s.inventory(inv(tag))) == 1; got != want {
			s.t.Errorf("inventory row %s after the restore: %v, want %v as at the target time", inv(tag), got, want)
		}
	}
}

// recoveryAppliedRevision reads the revision the agent last acknowledged
// for the stack's hub in server's database.
func (s *stack) recoveryAppliedRevision(server *pgtest.Server) int64 {
	s.t.Helper()
	var applied int64
	recoveryQuery(s.t, recoveryDB(server), func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT applied_revision FROM hubs WHERE id = $1`, s.hubID).Scan(&applied)
	})
	return applied
}

// recoveryCheckMasterKey starts serve on the restored database db without
// its master key, then with another one: each time it must exit and say
// what is wrong.
func (s *stack) recoveryCheckMasterKey(db postgres.Config) {
	s.t.Helper()
	missing := filepath.Join(s.t.TempDir(), "master.key")
	if log := recoveryServeFails(s.t, recoveryFleetManager(s.t, s.fm, db, missing, false)); !strings.Contains(log, "--encryption-key-file: LoadKeyring("+missing+")") {
		s.t.Errorf("serve without its master key: log does not name --encryption-key-file and LoadKeyring(%s):\n%s", missing, log)
	}
	otherKey := filepath.Join(s.t.TempDir(), "other.key")
	if err := secrets.GenerateKeyFile(otherKey); err != nil {
		s.t.Fatal(err)
	}
	keyring, err := secrets.LoadKeyring(secrets.Config{KeyFile: s.fm.keyFile})
	if err != nil {
		s.t.Fatal(err)
	}
	want := "the database holds secrets sealed under master key " + keyring.PrimaryKeyID()
	if log := recoveryServeFails(s.t, recoveryFleetManager(s.t, s.fm, db, otherKey, false)); !strings.Contains(log, want) {
		s.t.Errorf("serve with another master key: log does not say %q:\n%s", want, log)
	}
}

// recoveryConverge starts the service on the restored database db where
// the agent calls it, in place of orig, and checks that the agent converges
// the hub and the inventory: first not restarted, then restarted.
func (s *stack) recoveryConverge(orig *fleetManager, db postgres.Config, regs map[string]public.Cluster, inv func(string) string, applied int64) {
	s.t.Helper()
	// The service back where the agent calls it. The agent, not restarted,
	// sees the hub's revision behind the one it applied at its next
	// heartbeat and applies the whole desired set: what was registered after
	// the target time leaves the hub, what was deregistered after it comes
	// back; the service asks the hub, silent past its heartbeat timeout, for
	// its whole inventory, which brings the inventory back to what the hub
	// holds.
	s.fm = recoveryFleetManager(s.t, orig, db, orig.keyFile, true)
	s.fm.start()
	if h := s.hubStatus(); h.Revision >= applied {
		s.t.Fatalf("restored hub revision %d, want below the %d the agent applied before the restore", h.Revision, applied)
	}
	s.waitHubReady(fleet.ConditionTrue)
	for _, name := range []string{"c0", "c1"} {
		s.waitOnHub(managedClusterName(regs[name]), false)
	}
	s.waitOnHub(managedClusterName(regs["b0"]), true)
	s.waitPhase(regs["b0"].Id, public.Ready)
	s.recoveryInInventory(inv("c0"), true, "created on the hub after the target time, reported by the resync")
	s.recoveryInInventory(inv("a1"), false, "deleted from the hub after the target time, tombstoned by the resync")
	s.recoveryInInventory(inv("b0"), true, "still on the hub")
	s.g.Eventually(func() int64 { h := s.hubStatus(); return h.Revision - h.AppliedRevision }).WithTimeout(30*time.Second).
		Should(gomega.BeZero(), "the agent acknowledges the restored hub's revision")
	regs["d0"] = s.recoveryRegister("d0")["d0"]
	s.waitOnHub(managedClusterName(regs["d0"]), true)

	// Restarted, as the procedure says, the agent starts from revision 0
	// and the hub stays as the restored database wants it.
	s.agent.stop()
	s.agent = startAgent(s.t, s.fm, s.hub, s.hubID, s.creds)
	regs["e0"] = s.recoveryRegister("e0")["e0"]
	for _, name := range []string{"a1", "a2", "a3", "b0", "b1", "d0", "e0"} {
		if !s.onHub(managedClusterName(regs[name])) {
			s.t.Errorf("registration %s's ManagedCluster not on the hub after the agent's restart", name)
		}
	}
	for _, name := range []string{"a0", "c0", "c1"} {
		if s.onHub(managedClusterName(regs[name])) {
			s.t.Errorf("registration %s's ManagedCluster back on the hub after the agent's restart", name)
		}
	}
}
