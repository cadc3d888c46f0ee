package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
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

	want, got := orgCounts(g, db)
	g.Expect(want).To(gomega.HaveLen(6))
	g.Expect(got).To(gomega.Equal(want))

	var wantPhases, gotPhases []orgCount
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

// orgCount is the live registrations of one organisation, zone and phase.
type orgCount struct {
	OrgID, Zone, Phase string
	N                  int64
}

// orgCounts returns the live registrations per organisation, zone and phase
// as counted from the rows (want) and as registration_counts holds them
// (got, without the counters that fell to 0), in the same order.
func orgCounts(g *gomega.WithT, db *postgres.DB) (want, got []orgCount) {
	g.Expect(db.Gorm.Raw(`SELECT org_id, zone, phase, count(*) AS n FROM registrations WHERE deleted_at IS NULL
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`).Scan(&want).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Raw(`SELECT org_id, zone, phase, sum(live) AS n FROM registration_counts
		GROUP BY 1, 2, 3 HAVING sum(live) <> 0 ORDER BY 1, 2, 3`).Scan(&got).Error).To(gomega.Succeed())
	return want, got
}

// TestRegistrationLabelCountsFollowTheRows checks the counters of the
// counted labels' values against the rows: counted when a key joins the set,
// kept by the triggers through inserts, label changes, soft and hard
// deletes, and dropped when the key leaves the set.
func TestRegistrationLabelCountsFollowTheRows(t *testing.T) {
	g := gomega.NewWithT(t)
	store, db := newStoreOn(t, nil)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, labels)
		SELECT 'r-' || i, 'org-' || i % 3, 'u', 'c-' || i, (ARRAY['eu', 'us'])[1 + i % 2], 'ocp', 'accepted',
			jsonb_build_object('env', (ARRAY['prod', 'dev'])[1 + i % 5 / 4], 'team', 't' || i % 4)
		FROM generate_series(1, 500) AS i`)
	g.Expect(store.SyncCountedLabels(ctx, []string{"env"})).To(gomega.Succeed())
	exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, labels)
		SELECT 'n-' || i, 'org-1', 'u', 'n-' || i, 'eu', 'ocp', 'accepted', '{"env": "stage"}' FROM generate_series(1, 30) AS i`)
	exec(`UPDATE registrations SET labels = labels || '{"env": "prod"}' WHERE name LIKE 'c-1%'`)
	exec(`UPDATE registrations SET labels = labels - 'env' WHERE name LIKE 'c-2%'`)
	exec(`UPDATE registrations SET deleted_at = now() WHERE name LIKE 'c-3%'`)
	exec(`DELETE FROM registrations WHERE name LIKE 'n-2%'`)

	type count struct {
		OrgID, Key, Value, Zone string
		N                       int64
	}
	check := func(keys string) {
		t.Helper()
		var want, got []count
		g.Expect(db.Gorm.Raw(`SELECT r.org_id, l.key, l.value, r.zone, count(*) AS n
			FROM registrations r CROSS JOIN LATERAL jsonb_each_text(r.labels) AS l
			WHERE r.deleted_at IS NULL AND l.key IN (` + keys + `) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`).Scan(&want).Error).To(gomega.Succeed())
		g.Expect(db.Gorm.Raw(`SELECT org_id, key, value, zone, sum(live) AS n FROM registration_label_counts
			GROUP BY 1, 2, 3, 4 HAVING sum(live) <> 0 ORDER BY 1, 2, 3, 4`).Scan(&got).Error).To(gomega.Succeed())
		g.Expect(got).To(gomega.Equal(want))
	}
	check(`'env'`)
	g.Expect(store.SyncCountedLabels(ctx, []string{"team"})).To(gomega.Succeed())
	check(`'team'`)
	g.Expect(store.SyncCountedLabels(ctx, []string{"env", "team"})).To(gomega.Succeed())
	check(`'env', 'team'`)
}

// TestRegistrationLabelsFollowTheRows checks registration_labels, which the
// triggers keep, against the labels of the live registrations after inserts
// of one row and of many, label changes, a zone change, soft deletes, hard
// deletes and TRUNCATE, and that an update which sets none of its columns
// leaves it alone.
func TestRegistrationLabelsFollowTheRows(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	exec := func(sql string) {
		t.Helper()
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	type label struct {
		OrgID, Key, Value, ID, Zone string
		CreatedAt                   time.Time
	}
	check := func(step string) {
		t.Helper()
		var want, got []label
		g.Expect(db.Gorm.Raw(`SELECT r.org_id, l.key, l.value, r.id, r.zone, r.created_at
			FROM registrations r CROSS JOIN LATERAL jsonb_each_text(r.labels) AS l
			WHERE r.deleted_at IS NULL ORDER BY 1, 2, 3, 4`).Scan(&want).Error).To(gomega.Succeed())
		g.Expect(db.Gorm.Raw(`SELECT org_id, key, value, id, zone, created_at FROM registration_labels
			ORDER BY 1, 2, 3, 4`).Scan(&got).Error).To(gomega.Succeed())
		g.Expect(got).To(gomega.Equal(want), step)
	}
	exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, labels)
		SELECT 'r-' || i, 'org-' || i % 3, 'u', 'c-' || i, (ARRAY['eu', 'us'])[1 + i % 2], 'ocp', 'accepted',
			CASE WHEN i % 10 = 0 THEN '{}'::jsonb ELSE jsonb_build_object('env', (ARRAY['prod', 'dev'])[1 + i % 5 / 4], 'team', 't' || i % 4) END
		FROM generate_series(1, 300) AS i`)
	exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, labels)
		VALUES ('one', 'org-1', 'u', 'one', 'eu', 'ocp', 'accepted', '{"env": "stage", "a.b/c": "d"}')`)
	check("after the inserts")
	g.Expect(countRows(t, db, `SELECT count(*) FROM registration_labels`)).To(gomega.Equal(270*2 + 2))

	exec(`UPDATE registrations SET labels = labels || '{"env": "prod", "new": "x"}' WHERE name LIKE 'c-1%'`)
	exec(`UPDATE registrations SET labels = labels - 'team' WHERE name LIKE 'c-2%'`)
	exec(`UPDATE registrations SET zone = 'ap' WHERE name LIKE 'c-3%'`)
	exec(`UPDATE registrations SET deleted_at = now(), phase = 'deleted' WHERE name LIKE 'c-4%'`)
	check("after the updates")
	before := countRows(t, db, `SELECT count(*) FROM registration_labels`)
	exec(`UPDATE registrations SET deleted_at = now() WHERE name LIKE 'c-4%'`) // deleted again: no change
	exec(`UPDATE registrations SET phase = 'ready', updated_at = now()`)
	exec(`UPDATE registrations SET labels = labels WHERE name LIKE 'c-5%'`)
	g.Expect(countRows(t, db, `SELECT count(*) FROM registration_labels`)).To(gomega.Equal(before))
	check("after updates that change none of its columns")

	exec(`DELETE FROM registrations WHERE name LIKE 'c-6%' OR name = 'one'`)
	exec(`DELETE FROM registrations WHERE name LIKE 'c-4%'`) // soft-deleted already
	check("after the hard deletes")
	exec(`TRUNCATE registrations CASCADE`)
	g.Expect(countRows(t, db, `SELECT count(*) FROM registration_labels`)).To(gomega.BeZero())
}

// TestRecountRepairsRegistrationCounters writes registrations that the
// counters' triggers do not see, as a replica's write between a counting
// migration's backfill and its triggers was not seen, then migrates on:
// migration 202612020700 makes every counter the rows' count again.
func TestRecountRepairsRegistrationCounters(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db := pgtest.Open(t, pgtest.NewDatabase(t))
	g.Expect(db.MigrateTo(ctx, "202612020600")).To(gomega.Succeed())
	insert := `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, labels)
		SELECT ? || i, 'org-' || i % 3, 'u', ? || i, (ARRAY['eu', 'us'])[1 + i % 2], 'ocp', (ARRAY['accepted', 'ready'])[1 + i % 2],
			jsonb_build_object('env', (ARRAY['prod', 'dev'])[1 + i % 5 / 4])
		FROM generate_series(1, 200) AS i`
	g.Expect(db.Gorm.Exec(`INSERT INTO inventory_counted_labels (key) VALUES ('env')`).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(insert, "seen-", "seen-").Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Connection(func(conn *gorm.DB) error {
		// Triggers do not fire in a replica's session.
		if err := conn.Exec(`SET session_replication_role = replica`).Error; err != nil {
			return err
		}
		if err := conn.Exec(insert, "unseen-", "unseen-").Error; err != nil {
			return err
		}
		return conn.Exec(`RESET session_replication_role`).Error
	})).To(gomega.Succeed())

	counts := func() []int {
		var n []int
		g.Expect(db.Gorm.Raw(`SELECT (SELECT count(*) FROM registrations WHERE deleted_at IS NULL)::int
			UNION ALL SELECT (SELECT sum(live) FROM registration_counts)::int
			UNION ALL SELECT (SELECT sum(live) FROM registration_phase_counts)::int
			UNION ALL SELECT (SELECT count(*) FROM registrations WHERE deleted_at IS NULL AND labels ? 'env')::int
			UNION ALL SELECT (SELECT sum(live) FROM registration_label_counts WHERE key = 'env')::int`).Scan(&n).Error).To(gomega.Succeed())
		return n
	}
	g.Expect(counts()).To(gomega.Equal([]int{400, 200, 200, 400, 200}), "the unseen rows are not counted")
	g.Expect(db.Migrate(ctx)).To(gomega.Succeed())
	g.Expect(counts()).To(gomega.Equal([]int{400, 400, 400, 400, 400}))

	want, got := orgCounts(g, db)
	g.Expect(got).To(gomega.Equal(want))
}
