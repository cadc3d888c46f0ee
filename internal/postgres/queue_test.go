package postgres_test

import (
	"context"
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
	if first[0].Token == first[1].Token || !strings.HasPrefix(first[0].Token, owner+"/") {
		t.Errorf("claim tokens %q and %q; want distinct, each the owner %s and a suffix", first[0].Token, first[1].Token, owner)
	}
	lapsed := first[0]
	if _, err := store.RequestRegistrationDeletion(ctx, caller.OrgID, lapsed.Registration.ID); err != nil {
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
