package postgres_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestAcknowledgementFindsItsRegistrationsByIndex checks that a batch of
// the acknowledgement's wake-up (ackWakeCandidates, ack_wake.go, with
// values) reads the next rows of the hub after its cursor through the
// indexes in (revision, id) order, never every registration of the
// acknowledged revisions: no sequential scan, and no sort of what the
// indexes return, only of the batch.
func TestAcknowledgementFindsItsRegistrationsByIndex(t *testing.T) {
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	for _, sql := range []string{
		`INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity) VALUES ('hub-a', 'hub-a', 'eu', 'eu-1', 'agent', 100000)`,
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id, published_revision, published_generation,
			withdrawn_revision)
			SELECT 'r-' || i, 'org-a', 'u', 'c-' || i, 'eu', 'ocp', 'ready', 'hub-a', 1 + i / 1000, 1, CASE WHEN i % 7 = 0 THEN 2 + i / 1000 END
			FROM generate_series(1, 20000) AS i`,
		`ANALYZE registrations`,
	} {
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	plan := explain(t, db, `SELECT rev, id FROM (
	(SELECT published_revision AS rev, id FROM registrations
		WHERE hub_id = 'hub-a' AND deleted_at IS NULL AND published_revision IS NOT NULL AND (published_revision, id) > (3, 'r-3500')
			AND published_revision <= 15
		ORDER BY published_revision, id LIMIT 500)
	UNION ALL
	(SELECT withdrawn_revision, id FROM registrations
		WHERE hub_id = 'hub-a' AND withdrawn_revision IS NOT NULL AND (withdrawn_revision, id) > (3, 'r-3500') AND withdrawn_revision <= 15
		ORDER BY withdrawn_revision, id LIMIT 500)
) c ORDER BY rev, id LIMIT 500`)
	g.Expect(plan).To(gomega.ContainSubstring("registrations_hub_published_id"))
	g.Expect(plan).To(gomega.ContainSubstring("registrations_hub_withdrawals_id"))
	g.Expect(plan).NotTo(gomega.ContainSubstring("Seq Scan"))
	g.Expect(plan).NotTo(gomega.ContainSubstring("Sort  ("))
}
