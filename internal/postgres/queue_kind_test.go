package postgres_test

import (
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// explainArgs is explain for a statement with parameters.
func explainArgs(t *testing.T, db *postgres.DB, sql string, args ...any) string {
	t.Helper()
	var lines []string
	if err := db.Gorm.Raw("EXPLAIN "+sql, args...).Scan(&lines).Error; err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

// TestDeprovisionWorkReadsItsIndex: with a backlog of due registrations
// none of which is being deregistered (a bulk onboarding), every claim tier
// of deleting_mgr and its NextDue read the index of the registrations being
// deregistered, never the backlog; provisioning_mgr's unsettled tier keeps
// its own index. The statements are the queue's own.
func TestDeprovisionWorkReadsItsIndex(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	for _, sql := range []string{
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at,
			deletion_requested_at)
			SELECT 'r-' || i, 'org-a', 'u', 'c-' || i, 'eu', 'ocp', CASE WHEN i % 3 = 0 THEN 'ready' ELSE 'accepted' END, 1,
				CASE WHEN i % 3 = 0 THEN 1 ELSE 0 END, now() - interval '1 hour' + i * interval '10 ms',
				CASE WHEN i % 5000 = 0 THEN now() END
			FROM generate_series(1, 30000) AS i`,
		`ANALYZE registrations`,
	} {
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	claims, nextDue := postgres.ClaimStatementsForTest(fleet.WorkDeprovision)
	for i, claim := range claims {
		plan := explainArgs(t, db, claim, 1000, "owner", 60.0, 60.0)
		g.Expect(plan).To(gomega.Or(gomega.ContainSubstring("registrations_work_deprovision"), gomega.ContainSubstring("registrations_work_acknowledged")),
			"deprovision tier %d:\n%s", i, plan)
		g.Expect(plan).NotTo(gomega.ContainSubstring("Seq Scan"), "deprovision tier %d", i)
		g.Expect(plan).NotTo(gomega.ContainSubstring("registrations_work_unsettled"), "deprovision tier %d", i)
	}
	plan := explainArgs(t, db, nextDue)
	g.Expect(plan).To(gomega.ContainSubstring("registrations_work_deprovision"), "deprovision NextDue:\n%s", plan)

	claims, _ = postgres.ClaimStatementsForTest(fleet.WorkProvision)
	plan = explainArgs(t, db, claims[1], 1000, "owner", 60.0, 60.0)
	g.Expect(plan).To(gomega.ContainSubstring("registrations_work_unsettled"), "provision unsettled tier:\n%s", plan)
}
