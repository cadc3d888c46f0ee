package postgres_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestAcknowledgementFindsItsRegistrationsByIndex checks that the statement
// an agent's acknowledgement runs (wakeAcknowledged) reads the registrations
// of the acknowledged revisions through their index, not every registration
// of the hub. The statement is wakeAcknowledged's (agent.go), with values.
func TestAcknowledgementFindsItsRegistrationsByIndex(t *testing.T) {
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	for _, sql := range []string{
		`INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity) VALUES ('hub-a', 'hub-a', 'eu', 'eu-1', 'agent', 100000)`,
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id, published_revision, published_generation)
			SELECT 'r-' || i, 'org-a', 'u', 'c-' || i, 'eu', 'ocp', 'ready', 'hub-a', 1 + i / 10, 1 FROM generate_series(1, 20000) AS i`,
		`ANALYZE registrations`,
	} {
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	plan := explain(t, db, `SELECT id FROM registrations
	WHERE hub_id = 'hub-a' AND deleted_at IS NULL
	  AND (published_revision > 40 AND published_revision <= 41 OR withdrawn_revision > 40 AND withdrawn_revision <= 41)
	  AND (next_attempt_at IS NULL OR next_attempt_at > now() OR NOT woken_by_ack)
	ORDER BY id FOR UPDATE`)
	g.Expect(plan).To(gomega.ContainSubstring("registrations_hub_published"))
	g.Expect(plan).To(gomega.ContainSubstring("registrations_hub_withdrawals"))
	g.Expect(plan).NotTo(gomega.ContainSubstring("Seq Scan"))
}
