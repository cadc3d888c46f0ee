package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestClaimsTakeNewWorkBeforeRechecks checks that a registration a user
// waits for (new, or changed since it was reconciled) is claimed before the
// rechecks of settled registrations that fell due earlier, and that the
// rechecks fill the rest of the claim.
func TestClaimsTakeNewWorkBeforeRechecks(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	queue := postgres.NewQueue(store, postgres.DefaultQueueConfig())
	g.Expect(db.Gorm.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at)
		SELECT 'settled-' || lpad(i::text, 3, '0'), 'org-a', 'u', 'settled-' || i, 'eu', 'ocp', 'ready', 1, 1, now() - interval '1 hour' + i * interval '1 second'
		FROM generate_series(1, 30) AS i`).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at)
		VALUES ('changed', 'org-a', 'u', 'changed', 'eu', 'ocp', 'ready', 2, 1, now() - interval '1 minute')`).Error).To(gomega.Succeed())
	created, _, err := store.CreateRegistration(ctx, fleet.Identity{OrgID: "org-a", Username: "u"},
		fleet.RegistrationCreate{Name: "new", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred())

	claims, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-1", 5, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ids := []string{}
	for _, c := range claims {
		ids = append(ids, c.Registration.ID)
	}
	g.Expect(ids).To(gomega.ConsistOf(created.ID, "changed", "settled-001", "settled-002", "settled-003"))
}
