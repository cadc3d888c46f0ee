package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// claimedIDs returns the ids of claims, sorted.
func claimedIDs(claims []fleet.Claim) []string {
	ids := make([]string, len(claims))
	for i, c := range claims {
		ids[i] = c.Registration.ID
	}
	slices.Sort(ids)
	return ids
}

// TestClaimsTakeAcknowledgedWorkFirst builds a bulk onboarding's queue:
// many unplaced registrations due for an hour, and a few published on an
// agent hub waiting for its acknowledgement. Once the agent acknowledges
// the revision, the next claims take the acknowledged registrations before
// every unplaced one, and placement gets the rest of the batch. A pass
// recorded clears the mark; an acknowledgement during the pass, or a failed
// pass, keeps it.
// Withdrawals acknowledged come first in deleting_mgr's queue the same way.
func TestClaimsTakeAcknowledgedWorkFirst(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	// A backoff that outlasts the test: a failed pass is not due again in it.
	queue := postgres.NewQueue(store, postgres.QueueConfig{BackoffBase: time.Hour, BackoffMax: time.Hour})
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-a", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent,
		AgentIdentity: "hub-a-agent", Capacity: 1000})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, sql := range []string{
		// The backlog: due since an hour ago, one a second.
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at)
		SELECT 'new-' || lpad(i::text, 3, '0'), 'org-a', 'u', 'new-' || i, 'eu', 'ocp', 'accepted', 1, 0, now() - interval '1 hour' + i * interval '1 second'
		FROM generate_series(1, 200) AS i`,
		// Placed and published in revision 1, waiting for the agent (the pass asked to look again in 5 minutes).
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at,
			hub_id, published_revision, published_generation)
		SELECT 'pub-' || i, 'org-a', 'u', 'pub-' || i, 'eu', 'ocp', 'provisioning', 1, 1, now() + interval '5 minutes', '` + hub.ID + `', 1, 1
		FROM generate_series(1, 5) AS i`,
		// Being deregistered: withdrawn in revision 1, and a backlog of older deregistrations due.
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at,
			hub_id, published_revision, published_generation, withdrawn_revision, deletion_requested_at)
		VALUES ('gone', 'org-a', 'u', 'gone', 'eu', 'ocp', 'deprovisioning', 2, 2, now() + interval '5 minutes', '` + hub.ID + `', 1, 1, 1, now())`,
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at,
			deletion_requested_at)
		SELECT 'leaving-' || i, 'org-a', 'u', 'leaving-' || i, 'eu', 'ocp', 'deprovisioning', 2, 1, now() - interval '1 hour', now()
		FROM generate_series(1, 20) AS i`,
		`UPDATE hubs SET revision = 1, placed_count = 6 WHERE id = '` + hub.ID + `'`,
	} {
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}

	// Before the acknowledgement the backlog comes first.
	claims, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-1", 3, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claimedIDs(claims)).To(gomega.Equal([]string{"new-001", "new-002", "new-003"}))

	_, err = store.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: 1})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	// provisioning_mgr's next pass wakes what the heartbeat acknowledged.
	_, _, err = queue.WakeAcknowledged(ctx, 100)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	acked, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-1", 3, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claimedIDs(acked)).To(gomega.Equal([]string{"pub-1", "pub-2", "pub-3"}))
	// The acknowledged tier holds only what was acknowledged: placement gets the rest.
	mixed, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-2", 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claimedIDs(mixed)).To(gomega.Equal([]string{"new-004", "new-005", "new-006", "new-007", "new-008", "new-009", "new-010",
		"new-011", "pub-4", "pub-5"}))

	leaving, err := queue.ClaimRegistrations(ctx, fleet.WorkDeprovision, "replica-1", 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claimedIDs(leaving)).To(gomega.Equal([]string{"gone"}))

	// pub-1's pass is recorded: the mark goes. pub-2 is published again in
	// revision 2, which the agent acknowledges during its pass: the mark stays.
	g.Expect(db.Gorm.Exec(`UPDATE registrations SET published_revision = 2 WHERE id = 'pub-2'`).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE hubs SET revision = 2 WHERE id = ?`, hub.ID).Error).To(gomega.Succeed())
	_, err = store.RecordHubHeartbeat(ctx, hub.ID, hub.AgentIdentity, fleet.HubHeartbeat{AgentVersion: "test", AppliedRevision: 2})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, _, err = queue.WakeAcknowledged(ctx, 100)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	// pub-3's pass fails: the mark stays for when its backoff ends.
	done := make([]fleet.Completion, 0, 3)
	for _, c := range acked {
		out := fleet.Outcome{ID: c.Registration.ID, Conditions: c.Registration.Conditions, ObservedGeneration: c.Registration.Generation,
			RequeueAfter: time.Hour}
		if c.Registration.ID == "pub-3" {
			out.Err = errors.New("the hub did not answer")
		}
		done = append(done, fleet.Completion{Token: c.Token, Outcome: out})
	}
	kept, err := queue.CompleteRegistrations(ctx, done)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(kept).To(gomega.Equal([]bool{true, true, true}))
	var marks []struct {
		ID         string
		WokenByAck bool
		Due        bool
	}
	g.Expect(db.Gorm.Raw(`SELECT id, woken_by_ack, next_attempt_at <= now() AS due FROM registrations WHERE id IN ('pub-1', 'pub-2', 'pub-3') ORDER BY id`).
		Scan(&marks).Error).To(gomega.Succeed())
	g.Expect(marks).To(gomega.HaveLen(3))
	g.Expect(marks[0].WokenByAck || marks[0].Due).To(gomega.BeFalse(), "pub-1 after its pass: %+v", marks[0])
	g.Expect(marks[1].WokenByAck && marks[1].Due).To(gomega.BeTrue(), "pub-2 woken by an acknowledgement during its pass: %+v", marks[1])
	g.Expect(marks[2].WokenByAck && !marks[2].Due).To(gomega.BeTrue(), "pub-3 backing off after a failed pass: %+v", marks[2])
	again, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-1", 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claimedIDs(again)).To(gomega.Equal([]string{"pub-2"}))
}

// TestAcknowledgedClaimReadsItsIndex checks that the claim's first tier
// finds the acknowledged rows through registrations_work_acknowledged,
// whatever the backlog due before them: the statement is claim's
// (queue.go) with the tier woken_by_ack, with values.
func TestAcknowledgedClaimReadsItsIndex(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	for _, sql := range []string{
		`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, generation, observed_generation, next_attempt_at, woken_by_ack)
			SELECT 'r-' || i, 'org-a', 'u', 'c-' || i, 'eu', 'ocp', 'accepted', 1, 0, now() - interval '1 hour' + i * interval '10 ms', i % 2000 = 0
			FROM generate_series(1, 30000) AS i`,
		`ANALYZE registrations`,
	} {
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	plan := explain(t, db, `SELECT id FROM registrations
	WHERE deleted_at IS NULL AND next_attempt_at <= now()
	  AND (deletion_requested_at IS NOT NULL) = false
	  AND (claimed_until IS NULL OR claimed_until < now())
	  AND woken_by_ack
	ORDER BY next_attempt_at, id
	LIMIT 1000
	FOR UPDATE SKIP LOCKED`)
	g.Expect(plan).To(gomega.ContainSubstring("registrations_work_acknowledged"))
	g.Expect(plan).NotTo(gomega.ContainSubstring("Seq Scan"))
}
