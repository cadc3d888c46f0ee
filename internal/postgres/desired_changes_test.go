package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// desiredIDs returns the registration ids of a desired set's entries, in order.
func desiredIDs(set fleet.DesiredSet) []string {
	out := []string{}
	for _, r := range set.Registrations {
		out = append(out, r.RegistrationID)
	}
	return out
}

// TestDesiredChangesHoldWhatChangedSince: a delta of a hub's desired set
// holds the live registrations published after its base, in their new
// version, and the ids of those withdrawn after it, deregistered ones
// included; what was published or withdrawn at or before the base, and what
// is placed but not published yet, is not in it. A base past the hub's
// revision gets the full set.
func TestDesiredChangesHoldWhatChangedSince(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newInventoryEnv(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		g.Expect(e.db.Gorm.Exec(sql, args...).Error).To(gomega.Succeed(), sql)
	}
	exec(`UPDATE hubs SET revision = 10 WHERE id = ?`, e.hub.ID)
	for _, r := range []struct {
		id                   string
		published, withdrawn any
		deleted              bool
	}{
		{"r-1-old", 3, nil, false},
		{"r-2-new", 7, nil, false},
		{"r-3-unpublished", nil, nil, false},
		{"r-4-withdrawn", 2, 8, false},
		{"r-5-deregistered", 2, 6, true},
		{"r-6-withdrawn-before", 2, 4, false},
		{"r-7-published-then-withdrawn", 7, 9, false},
		{"r-8-deleted-before", 2, 5, true},
	} {
		deleted := any(nil)
		if r.deleted {
			deleted = "2026-12-01T00:00:00Z"
		}
		exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id, generation, published_revision,
	published_generation, withdrawn_revision, deleted_at, created_at)
VALUES (?, 'org-a', 'u', ?, 'eu', 'ocp', 'ready', ?, 2, ?, 2, ?, ?, clock_timestamp())`,
			r.id, r.id, e.hub.ID, r.published, r.withdrawn, deleted)
	}

	delta, err := e.store.DesiredChanges(ctx, e.hub.ID, "agent-1", 5)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(delta.Revision).To(gomega.Equal(int64(10)))
	g.Expect(delta.BaseRevision).To(gomega.Equal(int64(5)))
	g.Expect(desiredIDs(delta)).To(gomega.Equal([]string{"r-2-new"}))
	g.Expect(delta.Registrations[0].Generation).To(gomega.Equal(int64(2)))
	g.Expect(delta.Registrations[0].Objects).NotTo(gomega.BeEmpty(), "a delta's entry is rendered as a whole set's")
	g.Expect(delta.Removed).To(gomega.Equal([]string{"r-4-withdrawn", "r-5-deregistered", "r-7-published-then-withdrawn"}))

	full, err := e.store.DesiredSet(ctx, e.hub.ID, "agent-1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(full.BaseRevision).To(gomega.BeZero())
	g.Expect(full.Removed).To(gomega.BeEmpty())
	g.Expect(desiredIDs(full)).To(gomega.Equal([]string{"r-1-old", "r-2-new", "r-3-unpublished"}))

	// At the hub's revision: nothing changed since.
	none, err := e.store.DesiredChanges(ctx, e.hub.ID, "agent-1", 10)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(none.BaseRevision).To(gomega.Equal(int64(10)))
	g.Expect(none.Registrations).To(gomega.BeEmpty())
	g.Expect(none.Removed).To(gomega.BeEmpty())

	// Past the hub's revision (the database restored to an earlier point):
	// the agent's base is unknown here, so the whole set.
	past, err := e.store.DesiredChanges(ctx, e.hub.ID, "agent-1", 11)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(past.BaseRevision).To(gomega.BeZero())
	g.Expect(desiredIDs(past)).To(gomega.Equal(desiredIDs(full)))

	// Another agent learns nothing.
	_, err = e.store.DesiredChanges(ctx, e.hub.ID, "agent-2", 5)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
}

// TestDesiredChangesReadByIndex: the two statements of a delta read the
// registrations published and withdrawn after the base through their
// indexes, never every registration of the hub, so a delta costs what
// changed and not what the hub holds. The statements are desiredSnapshot's,
// with values.
func TestDesiredChangesReadByIndex(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	for _, sql := range []string{
		`INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity) VALUES ('hub-a', 'hub-a', 'eu', 'eu-1', 'agent', 100000)`,
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id, published_revision, published_generation,
			withdrawn_revision, deleted_at)
			SELECT 'r-' || i, 'org-a', 'u', 'c-' || i, 'eu', 'ocp', 'ready', 'hub-a', 1 + i / 10, 1,
				CASE WHEN i % 7 = 0 THEN 2 + i / 10 END, CASE WHEN i % 14 = 0 THEN now() END
			FROM generate_series(1, 20000) AS i`,
		`ANALYZE registrations`,
	} {
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	published := explain(t, db, `SELECT id, org_id, name, labels, generation, credentials, credentials_key_id FROM registrations
WHERE (hub_id = 'hub-a' AND deleted_at IS NULL AND withdrawn_revision IS NULL) AND (published_revision IS NOT NULL AND published_revision > 1990)
ORDER BY created_at, id`)
	g.Expect(published).To(gomega.ContainSubstring("registrations_hub_published"))
	g.Expect(published).NotTo(gomega.ContainSubstring("Seq Scan"))
	withdrawn := explain(t, db, `SELECT id FROM registrations WHERE hub_id = 'hub-a' AND withdrawn_revision IS NOT NULL AND withdrawn_revision > 1990
ORDER BY id`)
	g.Expect(withdrawn).To(gomega.ContainSubstring("registrations_hub_withdrawals"))
	g.Expect(withdrawn).NotTo(gomega.ContainSubstring("Seq Scan"))
}
