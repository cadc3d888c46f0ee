package onpostgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestCrashedPassResumesItsClaimsWhenTheDatabaseAnswers crashes the
// database (an immediate shutdown, as `pg_ctl stop -m immediate`) while
// provisioning_mgr holds the claims of a batch it has not read yet, and
// starts it again on the same data directory and port. The replica is alive
// and holds the claim's token: it frees and works what it claimed as soon as
// the database answers, instead of leaving the registrations to the end of a
// lease far longer than the wait allowed here.
func TestCrashedPassResumesItsClaimsWhenTheDatabaseAnswers(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	srv := pgtest.StartServer(t)
	cfg := srv.NewDatabase(t, "claims_crash")
	cfg.ConnectTimeout = time.Second
	// While the hubs are locked below, every reconciler that reads them
	// waits holding a connection: enough of them that the claim still gets
	// one.
	cfg.MaxOpenConns, cfg.MaxIdleConns = 20, 20
	db := pgtest.Open(t, cfg)
	g.Expect(db.Migrate(ctx)).To(gomega.Succeed())
	scfg := postgres.StoreConfig{MaxPageSize: 1000, IdempotencyKeyTTL: time.Hour, HeartbeatTimeout: time.Hour}
	e := &env{t: t, cfg: cfg, store: postgres.NewStore(db, testKeyring(t), fleet.SystemClock{}, scfg, authz.MustDefault()), scfg: scfg}
	e.hub("hub-crash", "eu", "eu-west-1", 50)
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.register("crash-"+string(rune('a'+i)), "eu", "").ID
	}

	// The claim's read of the claimed rows joins the hubs: with the hubs
	// locked, the replica's first pass commits its claim and then waits, so
	// the crash finds it holding claims it has not read.
	lockConn, err := pgx.Connect(ctx, cfg.DSN())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = lockConn.Close(context.Background()) })
	lock, err := lockConn.Begin(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = lock.Exec(ctx, `LOCK TABLE hubs IN ACCESS EXCLUSIVE MODE`)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	rcfg := defaultReconcileConfig()
	rcfg.Lease = 2 * time.Minute
	e.startReplica(replicaOptions{cfg: rcfg})
	g.Eventually(func() int {
		var claimed int
		g.Expect(lock.QueryRow(ctx, `SELECT count(*) FROM registrations WHERE id = ANY($1) AND claimed_by IS NOT NULL`, ids).Scan(&claimed)).To(gomega.Succeed())
		return claimed
	}).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(n), "the replica never claimed the batch")
	// The crash finds the claims held either way; seeing the claim's read
	// wait makes it the worst case, a claim whose rows the replica has not
	// read. Under heavy load that wait was once not seen within the time:
	// the test then goes on, and logs what the sessions were doing.
	quiet := gomega.NewGomega(func(string, ...int) {})
	if !quiet.Eventually(func() int {
		var waiting int
		if err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%deletion_age_seconds%'`).Scan(&waiting); err != nil {
			return -1
		}
		return waiting
	}).WithTimeout(30 * time.Second).WithPolling(20 * time.Millisecond).Should(gomega.Equal(1)) {
		t.Logf("the claim's read was not seen waiting on the hubs; crashing with the claims held. The server's sessions:\n%s", sessions(ctx, lock))
	}

	srv.Stop(true)
	srv.Start()
	back := time.Now()
	// Delivered (published to the hub's desired set) within a few retries of
	// the database's return: far less than the lease.
	const within = 5 * time.Second
	g.Eventually(func() []string {
		var missing []string
		for _, id := range ids {
			r, err := e.find(id)
			if err != nil || !cond(fleet.ConditionDelivered, fleet.ConditionFalse, fleet.ReasonPublished)(r) {
				missing = append(missing, id)
			}
		}
		return missing
	}).WithTimeout(within).WithPolling(50*time.Millisecond).Should(gomega.BeEmpty(),
		"registrations not delivered within %s of the database's return (lease %s)", within, rcfg.Lease)
	t.Logf("every claimed registration delivered %s after the database answered again", time.Since(back).Round(time.Millisecond))
}

// sessions lists what each session of the server is doing, for a failure's
// message.
func sessions(ctx context.Context, tx pgx.Tx) string {
	rows, err := tx.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''), left(query, 160)
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out strings.Builder
	for rows.Next() {
		var state, waitType, wait, query string
		if err := rows.Scan(&state, &waitType, &wait, &query); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&out, "%s %s/%s: %s\n", state, waitType, wait, strings.Join(strings.Fields(query), " "))
	}
	return out.String()
}
