package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// orgCreateLockSQL takes, on a connection of its own, the lock every create
// of storeCaller's organisation took before creates ran side by side, and
// that a counted create (a quota) still takes.
const orgCreateLockSQL = `SELECT pg_advisory_lock(hashtextextended('registrations:' || $1, 0))`

// holdOrgCreateLock holds org's create lock on a connection of its own
// until the returned release is called (or t ends).
func holdOrgCreateLock(t *testing.T, cfg postgres.Config, org string) (release func()) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), cfg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), orgCreateLockSQL, org); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if !released {
			released = true
			_ = conn.Close(context.Background())
		}
	}
	t.Cleanup(release)
	return release
}

// TestCreateRegistrationWithoutQuotaRunsSideBySide: with no quota, no
// create of an organisation waits for another, so creates of one
// organisation go on while a connection holds the organisation's create
// lock, which every create used to take.
func TestCreateRegistrationWithoutQuotaRunsSideBySide(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), quotaAuthorizer(t, 0))
	holdOrgCreateLock(t, cfg, storeCaller.OrgID)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	results := make(chan error, 6)
	for i := range cap(results) {
		go func() {
			_, _, err := store.CreateRegistration(ctx, storeCaller, fleet.RegistrationCreate{Name: fmt.Sprintf("side-%d", i), Zone: "eu", Product: fleet.ProductOCP}, fmt.Sprintf("key-%d", i))
			results <- err
		}()
	}
	for range cap(results) {
		g.Expect(<-results).To(gomega.Succeed(), "a create while the organisation's create lock is held elsewhere")
	}
	g.Expect(countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ?`, storeCaller.OrgID)).To(gomega.Equal(cap(results)))
}

// TestCreateRegistrationWithQuotaWaitsForTheOrg: with a quota, a create
// counts under the organisation's lock: it waits while another holds it, and
// is decided on the count once it has it.
func TestCreateRegistrationWithQuotaWaitsForTheOrg(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), quotaAuthorizer(t, 1))
	release := holdOrgCreateLock(t, cfg, storeCaller.OrgID)
	done := make(chan error, 1)
	go func() {
		_, _, err := store.CreateRegistration(context.Background(), storeCaller, fleet.RegistrationCreate{Name: "counted", Zone: "eu", Product: fleet.ProductOCP}, "")
		done <- err
	}()
	waiting := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`
	g.Eventually(func() int { return countRows(t, db, waiting) }).WithTimeout(20*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.Equal(1), "a counted create waiting on the organisation's lock")
	g.Expect(done).NotTo(gomega.Receive(), "a counted create finished while the organisation's lock was held")
	release()
	g.Eventually(done).WithTimeout(20 * time.Second).Should(gomega.Receive(gomega.BeNil()))
	_, _, err := store.CreateRegistration(context.Background(), storeCaller, fleet.RegistrationCreate{Name: "over", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeQuotaExceeded))
}

// TestCreateRegistrationQuotaCountsLiveRegistrations: the quota counts the
// organisation's live registrations however they were written (rows
// inserted by SQL count, through the counters' triggers), not its deleted
// ones nor another organisation's.
func TestCreateRegistrationQuotaCountsLiveRegistrations(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	store, db := newStoreAuthorized(t, nil, quotaAuthorizer(t, 5))
	seed := `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, deleted_at)
		SELECT gen_random_uuid()::text, ?, 'u', ? || i, ?, 'OCP', 'ready', ? FROM generate_series(1, ?) i`
	gone := time.Now()
	for _, s := range []struct {
		org, prefix, zone string
		deleted           *time.Time
		n                 int
	}{
		{storeCaller.OrgID, "live-eu-", "eu", nil, 2},
		{storeCaller.OrgID, "live-us-", "us", nil, 2},
		{storeCaller.OrgID, "gone-", "eu", &gone, 7},
		{"org-other", "other-", "eu", nil, 9},
	} {
		g.Expect(db.Gorm.Exec(seed, s.org, s.prefix, s.zone, s.deleted, s.n).Error).To(gomega.Succeed())
	}
	_, _, err := store.CreateRegistration(context.Background(), storeCaller, fleet.RegistrationCreate{Name: "fifth", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the fifth live registration with a quota of 5")
	_, _, err = store.CreateRegistration(context.Background(), storeCaller, fleet.RegistrationCreate{Name: "sixth", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeQuotaExceeded), "the sixth live registration with a quota of 5")
}

// TestCreateRegistrationIdempotencyRaces runs rounds of concurrent creates
// with one Idempotency-Key, with the same request and with others: every
// round makes one registration; the same request answers it as a replay,
// another request is refused with CodeIdempotencyKeyReused; none answers
// another error (a name taken, an internal error).
func TestCreateRegistrationIdempotencyRaces(t *testing.T) {
	t.Parallel()
	store, db := newStoreAuthorized(t, nil, quotaAuthorizer(t, 0))
	const rounds, racers = 10, 8
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		same := fleet.RegistrationCreate{Name: fmt.Sprintf("race-%d", round), Zone: "eu", Product: fleet.ProductOCP}
		requests := make([]fleet.RegistrationCreate, racers)
		for i := range requests {
			requests[i] = same
			if round%2 == 1 && i%2 == 1 {
				requests[i].Name = fmt.Sprintf("race-%d-other-%d", round, i)
			}
		}
		results := createConcurrently(store, racers, storeCaller, key, func(i int) fleet.RegistrationCreate { return requests[i] })
		created, replays, reused := 0, 0, 0
		for i, r := range results {
			switch {
			case r.err == nil && r.created:
				created++
			case r.err == nil && r.reg.Name == same.Name:
				replays++
			case fleet.ErrorCodeOf(r.err) == fleet.CodeIdempotencyKeyReused:
				reused++
			default:
				t.Errorf("round %d: CreateRegistration(%s, key %s) #%d = %v, created %v; want a registration or code %d",
					round, requests[i].Name, key, i, r.err, r.created, fleet.CodeIdempotencyKeyReused)
			}
		}
		if created != 1 || created+replays+reused != racers {
			t.Errorf("round %d: %d created, %d replays, %d refused as reused; want 1 created of %d", round, created, replays, reused, racers)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ?`, storeCaller.OrgID); n != rounds {
		t.Errorf("registrations after %d rounds = %d, want %d", rounds, n, rounds)
	}
}

// TestCreateRegistrationAnswersTheRowWritten: the answer of a create, built
// from the row it inserted, is what a read of the registration returns, and
// the row holds what a create writes: due at once by the database's clock,
// created, updated and due at one instant.
func TestCreateRegistrationAnswersTheRowWritten(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	store, db := newStoreOn(t, nil)
	ctx := context.Background()
	for _, create := range []fleet.RegistrationCreate{
		{Name: "bare", Zone: "eu", Product: fleet.ProductOCP},
		{Name: "full", DisplayName: "Full one", Labels: map[string]string{"env": "prod", "team": "a"}, Zone: "us", Region: "us-east-1",
			Product: fleet.ProductROSA, Credentials: &fleet.ImportCredentials{APIURL: "https://api.example:6443", Token: "t0k"}},
	} {
		reg, created, err := store.CreateRegistration(ctx, storeCaller, create, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(created).To(gomega.BeTrue())
		found, err := store.FindRegistration(ctx, storeCaller.OrgID, reg.ID)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(reg).To(gomega.Equal(found), "CreateRegistration(%s)'s answer and FindRegistration", create.Name)
		g.Expect(reg.HasCredentials).To(gomega.Equal(create.Credentials != nil))
		var row struct {
			Due, Same        bool
			Attempts         int
			Generation       int64
			ObservedGen      int64
			DeliveredVia     string
			LastError        string
			Unset            bool
			ConditionsLength int
		}
		err = db.Gorm.Raw(`SELECT next_attempt_at <= now() AS due, created_at = updated_at AND updated_at = next_attempt_at AS same,
			attempts, generation, observed_generation AS observed_gen, delivered_via, last_error,
			hub_id IS NULL AND claimed_by IS NULL AND claimed_until IS NULL AND published_revision IS NULL AND deleted_at IS NULL
				AND deletion_requested_at IS NULL AND import_material IS NULL AND delivery_failure IS NULL AND hub_conditions = '[]' AS unset,
			jsonb_array_length(conditions) AS conditions_length
			FROM registrations WHERE id = ?`, reg.ID).Scan(&row).Error
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(row).To(gomega.Equal(struct {
			Due, Same        bool
			Attempts         int
			Generation       int64
			ObservedGen      int64
			DeliveredVia     string
			LastError        string
			Unset            bool
			ConditionsLength int
		}{Due: true, Same: true, Generation: 1, Unset: true, ConditionsLength: 2}), "the row of %s", create.Name)
	}
}
