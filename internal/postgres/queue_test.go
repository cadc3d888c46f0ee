package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestQueueCompletesOnlyTheClaimHeld lets a provisioning pass's lease run out
// and the row be claimed again by deleting_mgr of the same process (one claim
// owner): the first pass can then neither place the registration nor record
// its outcome, and the second claim is intact.
func TestQueueCompletesOnlyTheClaimHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	queue := postgres.NewQueue(store, postgres.DefaultQueueConfig())
	if _, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-q", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent,
		AgentIdentity: "hub-q-agent", Capacity: 5}); err != nil {
		t.Fatal(err)
	}
	caller := fleet.Identity{OrgID: "org-q", Username: "quinn"}
	for _, name := range []string{"q-1", "q-2"} {
		if _, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}, ""); err != nil {
			t.Fatal(err)
		}
	}
	const owner = "replica-1"
	// A lease of zero has run out as soon as the claim commits.
	first, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, owner, 10, 0)
	if err != nil || len(first) != 2 {
		t.Fatalf("ClaimRegistrations(provision) = %d claims, %v; want 2", len(first), err)
	}
	if first[0].Token != first[1].Token || !strings.HasPrefix(first[0].Token, owner+"/") {
		t.Errorf("claim tokens %q and %q; want one for the claim, the owner %s and a suffix", first[0].Token, first[1].Token, owner)
	}
	lapsed := first[0]
	if _, err := store.RequestRegistrationDeletion(ctx, fleet.Permitted, caller.OrgID, lapsed.Registration.ID); err != nil {
		t.Fatal(err)
	}
	second, err := queue.ClaimRegistrations(ctx, fleet.WorkDeprovision, owner, 10, time.Minute)
	if err != nil || len(second) != 1 || second[0].Registration.ID != lapsed.Registration.ID {
		t.Fatalf("ClaimRegistrations(deprovision) after the provisioning lease ran out = %+v, %v; want %s", second, err, lapsed.Registration.ID)
	}

	placed, err := queue.PlaceRegistrations(ctx, []fleet.Claim{lapsed}, []fleet.DeliveryMode{fleet.DeliveryAgent})
	if err != nil || len(placed) != 1 || placed[0].Hub != nil || fleet.ErrorCodeOf(placed[0].Err) != fleet.CodeConflict {
		t.Errorf("PlaceRegistrations(lapsed claim) = %+v, %v; want a conflict (the claim was lost)", placed, err)
	}
	stale := fleet.Outcome{ID: lapsed.Registration.ID, ObservedGeneration: lapsed.Registration.Generation,
		Conditions: lapsed.Registration.Conditions.MarkFalse(fleet.ConditionPlaced, fleet.ReasonNoHubAvailable, "stale pass", lapsed.Registration.Generation, time.Now())}
	if kept, err := queue.CompleteRegistration(ctx, lapsed.Token, stale); err != nil || kept {
		t.Errorf("CompleteRegistration(lapsed claim) = %v, %v; want false (another claim holds the row)", kept, err)
	}
	var row struct {
		ClaimedBy *string
		HubID     *string
		Placed    bool
	}
	read := func() {
		t.Helper()
		if err := db.Gorm.Raw(`SELECT claimed_by, hub_id, conditions::text LIKE '%stale pass%' AS placed FROM registrations WHERE id = ?`,
			lapsed.Registration.ID).Scan(&row).Error; err != nil {
			t.Fatal(err)
		}
	}
	read()
	if row.ClaimedBy == nil || *row.ClaimedBy != second[0].Token || row.HubID != nil || row.Placed {
		t.Errorf("row after the lapsed pass's attempts = claimed by %v, hub %v, stale conditions %v; want claimed by %s, unplaced, unchanged",
			deref(row.ClaimedBy), deref(row.HubID), row.Placed, second[0].Token)
	}
	done := fleet.Outcome{ID: lapsed.Registration.ID, ObservedGeneration: second[0].Registration.Generation, Delete: true}
	if kept, err := queue.CompleteRegistration(ctx, second[0].Token, done); err != nil || !kept {
		t.Errorf("CompleteRegistration(current claim) = %v, %v; want true", kept, err)
	}

	// A lapsed claim nobody took since is still the row's latest word.
	other := first[1]
	out := fleet.Outcome{ID: other.Registration.ID, ObservedGeneration: other.Registration.Generation, Conditions: other.Registration.Conditions}
	if kept, err := queue.CompleteRegistration(ctx, other.Token, out); err != nil || !kept {
		t.Errorf("CompleteRegistration(lapsed claim, not claimed since) = %v, %v; want true", kept, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestCompleteRegistrationsRecordsEachRowAsItsOwn records three outcomes in
// one call: a failure backs off, a row whose claim another pass took is left
// to that pass, and a row woken during its claim is due again at once,
// whatever wait its pass asked for, with the delivery mode it reported.
func TestCompleteRegistrationsRecordsEachRowAsItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	queue := postgres.NewQueue(store, postgres.QueueConfig{BackoffBase: time.Minute, BackoffMax: time.Hour})
	caller := fleet.Identity{OrgID: "org-c", Username: "cleo"}
	for _, name := range []string{"c-1", "c-2", "c-3"} {
		if _, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}, ""); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-c", 10, time.Minute)
	if err != nil || len(claims) != 3 {
		t.Fatalf("ClaimRegistrations() = %d claims, %v; want 3", len(claims), err)
	}
	failed, stolen, woken := claims[0], claims[1], claims[2]
	if err := db.Gorm.Exec(`UPDATE registrations SET claimed_by = 'replica-d/other' WHERE id = ?`, stolen.Registration.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Exec(`UPDATE registrations SET next_attempt_at = now() WHERE id = ?`, woken.Registration.ID).Error; err != nil {
		t.Fatal(err)
	}
	outcome := func(c fleet.Claim) fleet.Outcome {
		return fleet.Outcome{ID: c.Registration.ID, ObservedGeneration: c.Registration.Generation,
			Conditions: c.Registration.Conditions.MarkTrue(fleet.ConditionPlaced, fleet.ReasonHubSelected, "recorded", 1, time.Now())}
	}
	done := []fleet.Completion{{Token: failed.Token, Outcome: outcome(failed)}, {Token: stolen.Token, Outcome: outcome(stolen)},
		{Token: woken.Token, Outcome: outcome(woken)}}
	done[0].Outcome.Err = errors.New("hub unreachable")
	done[2].Outcome.RequeueAfter, done[2].Outcome.DeliveredVia = time.Hour, fleet.DeliveryAgent
	kept, err := queue.CompleteRegistrations(ctx, done)
	if err != nil || !slices.Equal(kept, []bool{true, false, true}) {
		t.Fatalf("CompleteRegistrations() = %v, %v; want [true false true]", kept, err)
	}
	type row struct {
		Attempts     int
		LastError    string
		Wait         float64
		Claimed      bool
		DeliveredVia string
		Recorded     bool
	}
	read := func(id string) row {
		t.Helper()
		var r row
		if err := db.Gorm.Raw(`SELECT attempts, last_error, extract(epoch FROM next_attempt_at - now())::float8 AS wait, claimed_by IS NOT NULL AS claimed,
	delivered_via, conditions::text LIKE '%recorded%' AS recorded FROM registrations WHERE id = ?`, id).Scan(&r).Error; err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(failed.Registration.ID); r.Attempts != 1 || r.LastError != "hub unreachable" || r.Wait < 50 || r.Claimed || !r.Recorded {
		t.Errorf("failed row = %+v; want attempt 1, its error, a backoff of a minute, released, recorded", r)
	}
	if r := read(stolen.Registration.ID); r.Attempts != 0 || !r.Claimed || r.Recorded {
		t.Errorf("row another pass holds = %+v; want untouched and still claimed", r)
	}
	if r := read(woken.Registration.ID); r.Attempts != 0 || r.Wait > 1 || r.Claimed || r.DeliveredVia != string(fleet.DeliveryAgent) || !r.Recorded {
		t.Errorf("row woken during its claim = %+v; want due at once, released, delivered via agent, recorded", r)
	}
	if _, err := queue.CompleteRegistrations(ctx, []fleet.Completion{{Token: woken.Token, Outcome: fleet.Outcome{ID: woken.Registration.ID, Delete: true}}}); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
		t.Errorf("CompleteRegistrations(a deletion) = %v, want CodeValidation: deletions go through CompleteRegistration", err)
	}
}
