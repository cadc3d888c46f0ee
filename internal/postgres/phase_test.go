package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestEveryWriteStoresTheDerivedPhase walks each store operation that changes
// a registration's conditions, hub conditions or deletion state, through each
// phase, and checks after every step that the stored phase of every row is
// the one derived from its stored facts.
func TestEveryWriteStoresTheDerivedPhase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	queue := postgres.NewQueue(store, postgres.DefaultQueueConfig())
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-p", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent,
		AgentIdentity: "hub-p-agent", Capacity: 5})
	if err != nil {
		t.Fatal(err)
	}
	caller := fleet.Identity{OrgID: "org-p", Username: "pat"}
	now := time.Now()
	check := func(step string, want map[string]fleet.Phase) {
		t.Helper()
		drift, err := postgres.PhaseDriftForTest(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range drift {
			t.Errorf("after %s: %s", step, d)
		}
		for name, phase := range want {
			var got string
			if err := db.Gorm.Raw(`SELECT phase FROM registrations WHERE name = ?`, name).Scan(&got).Error; err != nil {
				t.Fatal(err)
			}
			if got != string(phase) {
				t.Errorf("after %s: %s has phase %q, want %q", step, name, got, phase)
			}
		}
	}
	for _, name := range []string{"p-ready", "p-failed", "p-unplaced"} {
		if _, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}, ""); err != nil {
			t.Fatal(err)
		}
	}
	check("CreateRegistration", map[string]fleet.Phase{"p-ready": fleet.PhaseAccepted})
	if err := db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE name IN ('p-ready', 'p-failed')`, hub.ID).Error; err != nil {
		t.Fatal(err)
	}

	claims := claimAll(t, queue, fleet.WorkProvision, 3)
	for name, c := range claims {
		g := c.Registration.Generation
		out := fleet.Outcome{ID: c.Registration.ID, ObservedGeneration: g,
			Conditions: c.Registration.Conditions.MarkTrue(fleet.ConditionPlaced, fleet.ReasonHubSelected, "placed", g, now).
				MarkTrue(fleet.ConditionDelivered, fleet.ReasonAcknowledged, "delivered", g, now)}
		switch name {
		case "p-failed":
			out.Conditions = out.Conditions.MarkFalse(fleet.ConditionDelivered, fleet.ReasonDeliveryFailed, "refused", g, now)
			out.Err = errors.New("the hub refused the delivery")
		case "p-unplaced":
			out.Conditions = c.Registration.Conditions.MarkFalse(fleet.ConditionPlaced, fleet.ReasonNoHubAvailable, "no hub", g, now)
		}
		if kept, err := queue.CompleteRegistration(ctx, c.Token, out); err != nil || !kept {
			t.Fatalf("CompleteRegistration(%s) = %v, %v; want true", name, kept, err)
		}
	}
	check("CompleteRegistration (provision)", map[string]fleet.Phase{"p-ready": fleet.PhaseProvisioning, "p-failed": fleet.PhaseFailed,
		"p-unplaced": fleet.PhaseAccepted})

	ready := claims["p-ready"].Registration.ID
	joined := fleet.Conditions{
		{Type: fleet.ConditionJoined, Status: fleet.ConditionTrue, Reason: "ManagedClusterJoined"},
		{Type: fleet.ConditionAvailable, Status: fleet.ConditionTrue, Reason: "ManagedClusterAvailable"},
	}
	if n, err := store.RecordRegistrationStatus(ctx, hub.ID, "hub-p-agent", []fleet.RegistrationHubStatus{{RegistrationID: ready, Conditions: joined}}); err != nil || n != 1 {
		t.Fatalf("RecordRegistrationStatus() = %d, %v; want 1", n, err)
	}
	check("RecordRegistrationStatus", map[string]fleet.Phase{"p-ready": fleet.PhaseReady})

	for name, c := range claims {
		if _, err := store.RequestRegistrationDeletion(ctx, fleet.Permitted, caller.OrgID, c.Registration.ID); err != nil {
			t.Fatalf("RequestRegistrationDeletion(%s): %v", name, err)
		}
	}
	check("RequestRegistrationDeletion", map[string]fleet.Phase{"p-ready": fleet.PhaseDeprovisioning, "p-failed": fleet.PhaseDeprovisioning})

	claims = claimAll(t, queue, fleet.WorkDeprovision, 3)
	for name, c := range claims {
		g := c.Registration.Generation
		out := fleet.Outcome{ID: c.Registration.ID, ObservedGeneration: g, RequeueAfter: time.Hour,
			Conditions: c.Registration.Conditions.MarkUnknown(fleet.ConditionDelivered, fleet.ReasonWithdrawing, "withdrawing", g, now)}
		if name == "p-unplaced" {
			out = fleet.Outcome{ID: c.Registration.ID, ObservedGeneration: g, Delete: true, Conditions: c.Registration.Conditions}
		}
		if kept, err := queue.CompleteRegistration(ctx, c.Token, out); err != nil || !kept {
			t.Fatalf("CompleteRegistration(%s) = %v, %v; want true", name, kept, err)
		}
	}
	check("CompleteRegistration (deprovision)", map[string]fleet.Phase{"p-ready": fleet.PhaseDeleting, "p-unplaced": fleet.PhaseDeleted})

	gone := fleet.Conditions{{Type: fleet.ConditionJoined, Status: fleet.ConditionFalse, Reason: "ManagedClusterLeft"}}
	if n, err := store.RecordRegistrationStatus(ctx, hub.ID, "hub-p-agent", []fleet.RegistrationHubStatus{{RegistrationID: ready, Conditions: gone}}); err != nil || n != 1 {
		t.Fatalf("RecordRegistrationStatus(while deleting) = %d, %v; want 1", n, err)
	}
	check("RecordRegistrationStatus (while deleting)", map[string]fleet.Phase{"p-ready": fleet.PhaseDeleting})
}

// claimAll claims n registrations of kind, by name.
func claimAll(t *testing.T, queue *postgres.Queue, kind fleet.WorkKind, n int) map[string]fleet.Claim {
	t.Helper()
	claims, err := queue.ClaimRegistrations(context.Background(), kind, "replica-p", 10, time.Minute)
	if err != nil || len(claims) != n {
		t.Fatalf("ClaimRegistrations(%s) = %d claims, %v; want %d", kind, len(claims), err, n)
	}
	out := map[string]fleet.Claim{}
	for _, c := range claims {
		out[c.Registration.Name] = c
	}
	return out
}
