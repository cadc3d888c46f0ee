package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// masterKey returns a fresh random 32-byte master key.
func masterKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatalf("rand.Read() = %v", err)
	}
	return key
}

// mustKeyring returns the keyring of primary and old, failing t on error.
func mustKeyring(t *testing.T, primary []byte, old ...[]byte) *secrets.Keyring {
	t.Helper()
	k, err := secrets.NewKeyring(primary, old...)
	if err != nil {
		t.Fatalf("NewKeyring() = %v", err)
	}
	return k
}

// newStoreOn returns a store on a fresh migrated database, and the database.
func newStoreOn(t *testing.T, change func(*postgres.StoreConfig)) (*postgres.Store, *postgres.DB) {
	t.Helper()
	return newStoreAuthorized(t, change, authz.MustDefault())
}

// newStoreAuthorized is newStoreOn with the store deciding through a.
func newStoreAuthorized(t *testing.T, change func(*postgres.StoreConfig), a fleet.Authorizer) (*postgres.Store, *postgres.DB) {
	t.Helper()
	db, _ := pgtest.NewMigratedDatabase(t)
	cfg := postgres.DefaultStoreConfig()
	if change != nil {
		change(&cfg)
	}
	return postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, cfg, a), db
}

// quotaAuthorizer is the default policy with a quota of n registrations per org.
func quotaAuthorizer(t *testing.T, n int) fleet.Authorizer {
	t.Helper()
	cfg := authz.DefaultConfig()
	cfg.Preflight.MaxRegistrationsPerOrg = n
	a, err := authz.New(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("authz.New(): %v", err)
	}
	return a
}

// countRows runs a count query, failing t on error.
func countRows(t *testing.T, db *postgres.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Gorm.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// createResult is the answer to one of many concurrent creates.
type createResult struct {
	reg     fleet.Registration
	created bool
	err     error
}

// createConcurrently runs n creates at once; create(i) is the i-th request.
func createConcurrently(store *postgres.Store, n int, caller fleet.Identity, key string, create func(i int) fleet.RegistrationCreate) []createResult {
	results := make([]createResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reg, created, err := store.CreateRegistration(context.Background(), caller, create(i), key)
			results[i] = createResult{reg, created, err}
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// tally counts results per error code; 0 counts successes.
func tally(results []createResult) map[fleet.ErrorCode]int {
	out := map[fleet.ErrorCode]int{}
	for _, r := range results {
		if r.err == nil {
			out[0]++
		} else {
			out[fleet.ErrorCodeOf(r.err)]++
		}
	}
	return out
}

var storeCaller = fleet.Identity{OrgID: "org-q", Username: "quinn"}

func TestCreateRegistrationQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	store, db := newStoreAuthorized(t, nil, quotaAuthorizer(t, 5))
	results := createConcurrently(store, 20, storeCaller, "", func(i int) fleet.RegistrationCreate {
		return fleet.RegistrationCreate{Name: fmt.Sprintf("c-%02d", i), Zone: "eu", Product: fleet.ProductOCP}
	})
	if got, want := tally(results), map[fleet.ErrorCode]int{0: 5, fleet.CodeQuotaExceeded: 15}; !maps.Equal(got, want) {
		t.Errorf("20 concurrent CreateRegistration() with quota 5: outcomes %v, want %v", got, want)
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ?`, storeCaller.OrgID); n != 5 {
		t.Errorf("registrations of %s = %d, want 5", storeCaller.OrgID, n)
	}
	// The quota is per organisation.
	other := fleet.Identity{OrgID: "org-other", Username: "olga"}
	if _, _, err := store.CreateRegistration(context.Background(), other, fleet.RegistrationCreate{Name: "c-00", Zone: "eu", Product: fleet.ProductOCP}, ""); err != nil {
		t.Errorf("CreateRegistration(org-other) with org-q at its quota = %v, want nil", err)
	}
}

func TestCreateRegistrationSameNameUnderConcurrency(t *testing.T) {
	t.Parallel()
	store, db := newStoreOn(t, nil)
	results := createConcurrently(store, 12, storeCaller, "", func(int) fleet.RegistrationCreate {
		return fleet.RegistrationCreate{Name: "same", Zone: "eu", Product: fleet.ProductROSA}
	})
	if got, want := tally(results), map[fleet.ErrorCode]int{0: 1, fleet.CodeNameTaken: 11}; !maps.Equal(got, want) {
		t.Errorf("12 concurrent CreateRegistration(same) outcomes = %v, want %v", got, want)
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE name = 'same'`); n != 1 {
		t.Errorf("registrations named same = %d, want 1", n)
	}
	// Another organisation may use the name.
	other := fleet.Identity{OrgID: "org-other", Username: "olga"}
	if _, _, err := store.CreateRegistration(context.Background(), other, fleet.RegistrationCreate{Name: "same", Zone: "eu", Product: fleet.ProductROSA}, ""); err != nil {
		t.Errorf("CreateRegistration(org-other, same) = %v, want nil", err)
	}
}

func TestCreateRegistrationIdempotencyUnderConcurrency(t *testing.T) {
	t.Parallel()
	store, db := newStoreOn(t, nil)
	create := fleet.RegistrationCreate{Name: "idem", Zone: "eu", Product: fleet.ProductOCP, Labels: map[string]string{"a": "b"}}
	results := createConcurrently(store, 12, storeCaller, "key-1", func(int) fleet.RegistrationCreate { return create })
	created := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("CreateRegistration(idem, key-1) #%d = %v, want nil", i, r.err)
		}
		if r.reg.ID != results[0].reg.ID {
			t.Errorf("CreateRegistration(idem, key-1) #%d id = %s, want %s as the others", i, r.reg.ID, results[0].reg.ID)
		}
		if r.created {
			created++
		}
	}
	if created != 1 {
		t.Errorf("CreateRegistration(idem, key-1) created = true %d times, want once", created)
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations`); n != 1 {
		t.Errorf("registrations = %d, want 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM idempotency_keys`); n != 1 {
		t.Errorf("idempotency keys = %d, want 1", n)
	}
	changed := create
	changed.Name = "other"
	if _, _, err := store.CreateRegistration(context.Background(), storeCaller, changed, "key-1"); fleet.ErrorCodeOf(err) != fleet.CodeIdempotencyKeyReused {
		t.Errorf("CreateRegistration(other, key-1) = %v, want code %d", err, fleet.CodeIdempotencyKeyReused)
	}
	other := fleet.Identity{OrgID: "org-other", Username: "olga"}
	if _, created, err := store.CreateRegistration(context.Background(), other, create, "key-1"); err != nil || !created {
		t.Errorf("CreateRegistration(org-other, idem, key-1) = %v, %v; want a new registration (keys are per organisation)", created, err)
	}
}

func TestCreateRegistrationExpiredIdempotencyKey(t *testing.T) {
	t.Parallel()
	store, db := newStoreOn(t, func(c *postgres.StoreConfig) { c.IdempotencyKeyTTL = time.Second })
	ctx := context.Background()
	first, created, err := store.CreateRegistration(ctx, storeCaller, fleet.RegistrationCreate{Name: "first", Zone: "eu", Product: fleet.ProductOCP}, "key-x")
	if err != nil || !created {
		t.Fatalf("CreateRegistration(first, key-x) = %v, %v", created, err)
	}
	gomega.NewWithT(t).Eventually(func() int {
		return countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE key = 'key-x' AND created_at < now() - interval '1 second'`)
	}).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(gomega.Equal(1), "key-x never grew older than its TTL")

	second := fleet.RegistrationCreate{Name: "second", Zone: "eu", Product: fleet.ProductOCP}
	reg, created, err := store.CreateRegistration(ctx, storeCaller, second, "key-x")
	if err != nil || !created || reg.ID == first.ID || reg.Name != "second" {
		t.Fatalf("CreateRegistration(second, expired key-x) = %s %s, %v, %v; want a new registration", reg.ID, reg.Name, created, err)
	}
	again, created, err := store.CreateRegistration(ctx, storeCaller, second, "key-x")
	if err != nil || created || again.ID != reg.ID {
		t.Errorf("CreateRegistration(second, key-x) replayed = %s, %v, %v; want %s, false, nil", again.ID, created, err, reg.ID)
	}
	if n := countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE key = 'key-x' AND registration_id = ?`, reg.ID); n != 1 {
		t.Errorf("key-x rows naming %s = %d, want 1", reg.ID, n)
	}
}

func TestCreateRegistrationZone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		defaultZone string
		zone        string
		wantZone    string
		wantCode    fleet.ErrorCode
	}{
		{"default zone fills in", "eu", "", "eu", 0},
		{"explicit zone wins over the default", "eu", "us", "us", 0},
		{"explicit zone without a default", "", "ap", "ap", 0},
		{"zone required without a default", "", "", "", fleet.CodeValidation},
		{"invalid zone", "eu", "EU", "", fleet.CodeValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, _ := newStoreOn(t, func(c *postgres.StoreConfig) { c.DefaultZone = tc.defaultZone })
			reg, _, err := store.CreateRegistration(context.Background(), storeCaller, fleet.RegistrationCreate{Name: "z", Zone: tc.zone, Product: fleet.ProductOCP}, "")
			if tc.wantCode != 0 {
				if fleet.ErrorCodeOf(err) != tc.wantCode {
					t.Errorf("CreateRegistration(zone %q, default %q) = %v, want code %d", tc.zone, tc.defaultZone, err, tc.wantCode)
				}
				return
			}
			if err != nil || reg.Zone != tc.wantZone {
				t.Errorf("CreateRegistration(zone %q, default %q) = zone %q, %v; want %q", tc.zone, tc.defaultZone, reg.Zone, err, tc.wantZone)
			}
			found, err := store.FindRegistration(context.Background(), storeCaller.OrgID, reg.ID)
			if err != nil || found.Zone != tc.wantZone {
				t.Errorf("FindRegistration(%s) = zone %q, %v; want %q", reg.ID, found.Zone, err, tc.wantZone)
			}
		})
	}
}
