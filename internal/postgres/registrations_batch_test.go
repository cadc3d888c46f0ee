package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// batchOf returns the items of a batch without idempotency keys.
func batchOf(creates ...fleet.RegistrationCreate) []fleet.RegistrationCreateItem {
	items := make([]fleet.RegistrationCreateItem, len(creates))
	for i, c := range creates {
		items[i] = fleet.RegistrationCreateItem{Create: c}
	}
	return items
}

// keyed gives item i of items the key key/i, as the API does.
func keyed(key string, items []fleet.RegistrationCreateItem) []fleet.RegistrationCreateItem {
	out := make([]fleet.RegistrationCreateItem, len(items))
	for i, it := range items {
		it.IdempotencyKey = fmt.Sprintf("%s/%d", key, i)
		out[i] = it
	}
	return out
}

// ocp is a valid create of name in zone eu.
func ocp(name string) fleet.RegistrationCreate {
	return fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}
}

// outcomes renders results as codes, 0 for a registration: what a test compares.
func outcomes(results []fleet.RegistrationResult) []fleet.ErrorCode {
	out := make([]fleet.ErrorCode, len(results))
	for i, r := range results {
		if r.Err != nil {
			out[i] = fleet.ErrorCodeOf(r.Err)
		}
	}
	return out
}

func wantOutcomes(t *testing.T, call string, results []fleet.RegistrationResult, want ...fleet.ErrorCode) {
	t.Helper()
	if got := outcomes(results); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s outcomes = %v, want %v", call, got, want)
		for i, r := range results {
			t.Logf("item %d: %v", i, r.Err)
		}
	}
}

// productsAuthorizer is the default policy accepting only products.
func productsAuthorizer(t *testing.T, products ...fleet.Product) fleet.Authorizer {
	t.Helper()
	cfg := authz.DefaultConfig()
	cfg.Preflight.AcceptedProducts = products
	a, err := authz.New(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("authz.New(): %v", err)
	}
	return a
}

func TestCreateRegistrationsPerItemResultsInOrder(t *testing.T) {
	t.Parallel()
	store, db := newStoreAuthorized(t, func(c *postgres.StoreConfig) {
		c.Zones = fleet.Zones{Served: []string{"eu"}, Deployments: map[string]string{"us": "https://fleet.us.example.com"}}
	}, productsAuthorizer(t, fleet.ProductOCP, fleet.ProductROSA))
	ctx := context.Background()
	if _, _, err := store.CreateRegistration(ctx, storeCaller, ocp("taken"), ""); err != nil {
		t.Fatalf("CreateRegistration(taken) = %v", err)
	}
	withCreds := fleet.RegistrationCreate{Name: "creds", Zone: "eu", Product: fleet.ProductROSA, Labels: map[string]string{"env": "prod"},
		Credentials: &fleet.ImportCredentials{APIURL: "https://api.creds.example.com:6443", Token: "sha256~t"}}
	results, err := store.CreateRegistrations(ctx, storeCaller, batchOf(
		ocp("a"),        // 0 created
		ocp("Bad_Name"), // 1 validation
		ocp("taken"),    // 2 a live registration has the name
		ocp("a"),        // 3 item 0 has the name
		fleet.RegistrationCreate{Name: "us-1", Zone: "us", Product: fleet.ProductOCP}, // 4 zone not served
		fleet.RegistrationCreate{Name: "eks", Zone: "eu", Product: fleet.ProductEKS},  // 5 product not accepted
		withCreds, // 6 created
		ocp("b"),  // 7 created
	))
	if err != nil {
		t.Fatalf("CreateRegistrations() = %v", err)
	}
	wantOutcomes(t, "CreateRegistrations()", results, 0, fleet.CodeValidation, fleet.CodeNameTaken, fleet.CodeNameTaken,
		fleet.CodeZoneNotServed, fleet.CodeProductNotAccepted, 0, 0)
	for _, i := range []int{0, 6, 7} {
		r := results[i].Registration
		if !results[i].Created || r.ID == "" || r.Phase != fleet.PhaseAccepted || r.Owner != storeCaller.Username || r.CreatedAt.IsZero() {
			t.Errorf("CreateRegistrations() item %d = %+v, created %v; want a new accepted registration", i, r, results[i].Created)
		}
		found, err := store.FindRegistration(ctx, storeCaller.OrgID, r.ID)
		if err != nil || found.Name != r.Name || found.HasCredentials != r.HasCredentials || found.Phase != r.Phase {
			t.Errorf("FindRegistration(item %d) = %+v, %v; want it as the batch answered %+v", i, found, err, r)
		}
	}
	if r := results[6].Registration; !r.HasCredentials || r.Labels["env"] != "prod" || r.Product != fleet.ProductROSA {
		t.Errorf("CreateRegistrations() item 6 = %+v, want its labels, product and credentials", r)
	}
	if msg := fleet.ErrorMessageOf(results[3].Err); msg != "item 0 of the batch registers a cluster of this name" {
		t.Errorf("CreateRegistrations() item 3 = %q, want it to name item 0", msg)
	}
	if d := fleet.ErrorDetailsOf(results[4].Err); d[fleet.DetailDeploymentURL] != "https://fleet.us.example.com" {
		t.Errorf("CreateRegistrations() item 4 details = %v, want the us deployment", d)
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ? AND next_attempt_at IS NOT NULL`, storeCaller.OrgID); n != 4 {
		t.Errorf("registrations due = %d, want 4 (taken, a, creds, b)", n)
	}
	if n := countRows(t, db, `SELECT coalesce(sum(live), 0)::int FROM registration_counts WHERE org_id = ?`, storeCaller.OrgID); n != 4 {
		t.Errorf("registration_counts live = %d, want 4", n)
	}
	// The credentials are sealed to their row, as a single create's.
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE name = 'creds' AND credentials IS NOT NULL AND credentials_key_id IS NOT NULL
		AND position('sha256~t'::bytea in credentials) = 0`); n != 1 {
		t.Errorf("registrations named creds with sealed credentials = %d, want 1", n)
	}
}

func TestCreateRegistrationsQuotaReachedMidBatch(t *testing.T) {
	t.Parallel()
	store, db := newStoreAuthorized(t, nil, quotaAuthorizer(t, 5))
	ctx := context.Background()
	for _, name := range []string{"x1", "x2", "x3"} {
		if _, _, err := store.CreateRegistration(ctx, storeCaller, ocp(name), ""); err != nil {
			t.Fatalf("CreateRegistration(%s) = %v", name, err)
		}
	}
	// As creates one after the other: a taken name or a duplicate uses no
	// room; the quota is decided before the name.
	results, err := store.CreateRegistrations(ctx, storeCaller, batchOf(ocp("x1"), ocp("a"), ocp("a"), ocp("b"), ocp("c"), ocp("x2")))
	if err != nil {
		t.Fatalf("CreateRegistrations() = %v", err)
	}
	wantOutcomes(t, "CreateRegistrations(quota 5, 3 live)", results,
		fleet.CodeNameTaken, 0, fleet.CodeNameTaken, 0, fleet.CodeQuotaExceeded, fleet.CodeQuotaExceeded)
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ? AND deleted_at IS NULL`, storeCaller.OrgID); n != 5 {
		t.Errorf("live registrations = %d, want the quota, 5", n)
	}
}

func TestCreateRegistrationsQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	store, db := newStoreAuthorized(t, nil, quotaAuthorizer(t, 25))
	var wg sync.WaitGroup
	created := make([]int, 6)
	for b := range created {
		wg.Go(func() {
			var creates []fleet.RegistrationCreate
			for i := range 10 {
				creates = append(creates, ocp(fmt.Sprintf("b%d-%d", b, i)))
			}
			results, err := store.CreateRegistrations(context.Background(), storeCaller, batchOf(creates...))
			if err != nil {
				t.Errorf("CreateRegistrations(batch %d) = %v", b, err)
				return
			}
			for _, r := range results {
				if r.Err == nil {
					created[b]++
				} else if fleet.ErrorCodeOf(r.Err) != fleet.CodeQuotaExceeded {
					t.Errorf("CreateRegistrations(batch %d) item = %v, want a registration or QuotaExceeded", b, r.Err)
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range created {
		total += n
	}
	if total != 25 {
		t.Errorf("6 concurrent batches of 10 with quota 25 created %v = %d, want 25", created, total)
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ?`, storeCaller.OrgID); n != 25 {
		t.Errorf("registrations = %d, want 25", n)
	}
}

func TestCreateRegistrationsIdempotentRetry(t *testing.T) {
	t.Parallel()
	store, db := newStoreOn(t, nil)
	ctx := context.Background()
	blocker, _, err := store.CreateRegistration(ctx, storeCaller, ocp("b"), "")
	if err != nil {
		t.Fatalf("CreateRegistration(b) = %v", err)
	}
	items := keyed("k", batchOf(ocp("a"), ocp("b"), ocp("c")))
	first, err := store.CreateRegistrations(ctx, storeCaller, items)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "CreateRegistrations(k)", first, 0, fleet.CodeNameTaken, 0)
	if _, err := store.RequestRegistrationDeletion(ctx, fleet.Permitted, storeCaller.OrgID, blocker.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Exec(`UPDATE registrations SET deleted_at = now() WHERE id = ?`, blocker.ID).Error; err != nil {
		t.Fatal(err)
	}
	// The retry replays what was created and creates what failed.
	again, err := store.CreateRegistrations(ctx, storeCaller, items)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "CreateRegistrations(k) again", again, 0, 0, 0)
	for _, i := range []int{0, 2} {
		if again[i].Created || again[i].Registration.ID != first[i].Registration.ID {
			t.Errorf("retry item %d = %s created %v, want the replay of %s", i, again[i].Registration.ID, again[i].Created, first[i].Registration.ID)
		}
	}
	if !again[1].Created || again[1].Registration.Name != "b" {
		t.Errorf("retry item 1 = %+v created %v, want b created now", again[1].Registration, again[1].Created)
	}
	third, err := store.CreateRegistrations(ctx, storeCaller, items)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "CreateRegistrations(k) a third time", third, 0, 0, 0)
	for i := range third {
		if third[i].Created || third[i].Registration.ID != again[i].Registration.ID {
			t.Errorf("third call item %d = %s created %v, want the replay of %s", i, third[i].Registration.ID, third[i].Created, again[i].Registration.ID)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations WHERE org_id = ? AND deleted_at IS NULL`, storeCaller.OrgID); n != 3 {
		t.Errorf("live registrations = %d, want 3", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM idempotency_keys WHERE org_id = ? AND key LIKE 'k/%'`, storeCaller.OrgID); n != 3 {
		t.Errorf("idempotency keys k/i = %d, want 3", n)
	}
	// The same key with another body refuses that item only.
	changed := keyed("k", batchOf(ocp("a"), ocp("other"), ocp("c")))
	results, err := store.CreateRegistrations(ctx, storeCaller, changed)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "CreateRegistrations(k, item 1 changed)", results, 0, fleet.CodeIdempotencyKeyReused, 0)
}

func TestCreateRegistrationsSameKeyUnderConcurrency(t *testing.T) {
	t.Parallel()
	store, db := newStoreOn(t, nil)
	var creates []fleet.RegistrationCreate
	for i := range 20 {
		creates = append(creates, ocp(fmt.Sprintf("c-%02d", i)))
	}
	items := keyed("same", batchOf(creates...))
	answers := make([][]fleet.RegistrationResult, 4)
	var wg sync.WaitGroup
	for n := range answers {
		wg.Go(func() {
			results, err := store.CreateRegistrations(context.Background(), storeCaller, items)
			if err != nil {
				t.Errorf("CreateRegistrations(same) #%d = %v", n, err)
			}
			answers[n] = results
		})
	}
	wg.Wait()
	for i := range items {
		created := 0
		for n, results := range answers {
			if len(results) != len(items) || results[i].Err != nil {
				t.Fatalf("CreateRegistrations(same) #%d item %d = %v, want a registration or its replay", n, i, results)
			}
			if results[i].Registration.ID != answers[0][i].Registration.ID {
				t.Errorf("CreateRegistrations(same) #%d item %d = %s, want %s as the others", n, i, results[i].Registration.ID, answers[0][i].Registration.ID)
			}
			if results[i].Created {
				created++
			}
		}
		if created != 1 {
			t.Errorf("item %d created %d times, want once", i, created)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations`); n != 20 {
		t.Errorf("registrations = %d, want 20", n)
	}
}

// TestCreateRegistrationsKeyRace: batches with one key and other bodies meet
// on the keys, not the names; one registers its items, the others find its
// keys when they run again and refuse their items.
func TestCreateRegistrationsKeyRace(t *testing.T) {
	t.Parallel()
	store, db := newStoreOn(t, nil)
	answers := make([][]fleet.RegistrationResult, 4)
	var wg sync.WaitGroup
	for n := range answers {
		wg.Go(func() {
			var creates []fleet.RegistrationCreate
			for i := range 20 {
				creates = append(creates, ocp(fmt.Sprintf("r%d-%02d", n, i)))
			}
			results, err := store.CreateRegistrations(context.Background(), storeCaller, keyed("race", batchOf(creates...)))
			if err != nil {
				t.Errorf("CreateRegistrations(race) #%d = %v", n, err)
			}
			answers[n] = results
		})
	}
	wg.Wait()
	winners := 0
	for n, results := range answers {
		codes := map[fleet.ErrorCode]int{}
		for _, c := range outcomes(results) {
			codes[c]++
		}
		switch {
		case codes[0] == 20:
			winners++
		case codes[fleet.CodeIdempotencyKeyReused] != 20:
			t.Errorf("CreateRegistrations(race) #%d outcomes = %v, want all registered or all IdempotencyKeyReused", n, codes)
		}
	}
	if winners != 1 {
		t.Errorf("CreateRegistrations(race): %d batches registered their items, want 1", winners)
	}
	if n := countRows(t, db, `SELECT count(*) FROM registrations`); n != 20 {
		t.Errorf("registrations = %d, want 20", n)
	}
}

func TestCreateRegistrationsCallerRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	cfg := authz.DefaultConfig()
	cfg.Preflight.DeniedOrgs = []string{storeCaller.OrgID}
	a, err := authz.New(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, db := newStoreAuthorized(t, nil, a)
	_, err = store.CreateRegistrations(context.Background(), storeCaller, keyed("k", batchOf(ocp("a"), ocp("b"))))
	if fleet.ErrorCodeOf(err) != fleet.CodeOrgNotAllowed {
		t.Errorf("CreateRegistrations(denied org) = %v, want code %d", err, fleet.CodeOrgNotAllowed)
	}
	if n := countRows(t, db, `SELECT (SELECT count(*) FROM registrations) + (SELECT count(*) FROM idempotency_keys)`); n != 0 {
		t.Errorf("rows written = %d, want none", n)
	}
}
