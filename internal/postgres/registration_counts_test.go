package postgres_test

import (
	"fmt"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestRegistrationCountsFollowTheRows checks the counters the triggers keep
// against a count of the rows, after inserts, phase changes, soft and hard
// deletes in statements of one row and of many.
func TestRegistrationCountsFollowTheRows(t *testing.T) {
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		g.Expect(db.Gorm.Exec(sql, args...).Error).To(gomega.Succeed(), sql)
	}
	insert := `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase)
		SELECT 'r-' || ? || '-' || i, ?, 'u', 'c-' || ? || '-' || i, ?, 'ocp', 'accepted' FROM generate_series(1, ?) AS i`
	exec(insert, "a", "org-a", "a", "eu", 300)
	exec(insert, "b", "org-b", "b", "us", 40)
	for i := range 5 {
		exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase) VALUES (?, 'org-b', 'u', ?, 'eu', 'ocp', 'accepted')`,
			fmt.Sprintf("one-%d", i), fmt.Sprintf("one-%d", i))
	}
	exec(`UPDATE registrations SET phase = 'ready' WHERE org_id = 'org-a' AND name LIKE 'c-a-1%'`)
	exec(`UPDATE registrations SET phase = 'provisioning' WHERE id = 'one-1'`)
	exec(`UPDATE registrations SET updated_at = now() WHERE org_id = 'org-b'`)
	exec(`UPDATE registrations SET deleted_at = now(), phase = 'deleted' WHERE org_id = 'org-a' AND name LIKE 'c-a-2%'`)
	exec(`UPDATE registrations SET deletion_requested_at = now(), phase = 'deleting' WHERE id = 'one-2'`)
	exec(`DELETE FROM registrations WHERE org_id = 'org-b' AND name LIKE 'c-b-3%'`)
	exec(`DELETE FROM registrations WHERE deleted_at IS NOT NULL AND name = 'c-a-20'`)

	type count struct {
		OrgID, Zone, Phase string
		N                  int64
	}
	var want, got []count
	g.Expect(db.Gorm.Raw(`SELECT org_id, zone, phase, count(*) AS n FROM registrations WHERE deleted_at IS NULL
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`).Scan(&want).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Raw(`SELECT org_id, zone, phase, sum(live) AS n FROM registration_counts
		GROUP BY 1, 2, 3 HAVING sum(live) <> 0 ORDER BY 1, 2, 3`).Scan(&got).Error).To(gomega.Succeed())
	g.Expect(want).To(gomega.HaveLen(6))
	g.Expect(got).To(gomega.Equal(want))

	var wantPhases, gotPhases []count
	g.Expect(db.Gorm.Raw(`SELECT phase, count(*) AS n FROM registrations WHERE deleted_at IS NULL GROUP BY 1 ORDER BY 1`).
		Scan(&wantPhases).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Raw(`SELECT phase, sum(live) AS n FROM registration_phase_counts GROUP BY 1 HAVING sum(live) <> 0 ORDER BY 1`).
		Scan(&gotPhases).Error).To(gomega.Succeed())
	g.Expect(gotPhases).To(gomega.Equal(wantPhases))

	var shards int64
	g.Expect(db.Gorm.Raw(`SELECT count(DISTINCT shard) FROM registration_counts WHERE org_id = 'org-a'`).Scan(&shards).Error).To(gomega.Succeed())
	g.Expect(shards).To(gomega.BeNumerically(">", 1), "one organisation's counter is spread over shards")

	exec(`TRUNCATE registrations CASCADE`)
	var left int64
	g.Expect(db.Gorm.Raw(`SELECT (SELECT count(*) FROM registration_counts) + (SELECT count(*) FROM registration_phase_counts)`).
		Scan(&left).Error).To(gomega.Succeed())
	g.Expect(left).To(gomega.BeZero())
}
