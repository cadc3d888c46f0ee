package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestClaimThatLostItsAnswerIsFreedByItsToken cuts a claim short after it
// committed (its read of the claimed rows waits on the locked hubs until the
// caller's deadline): the claim returns, with its error, the rows it holds
// under its token. Freeing them with that token makes the rows the claim
// still holds due again at once, and leaves alone a row another claim took
// since and a row whose outcome was recorded.
func TestClaimThatLostItsAnswerIsFreedByItsToken(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	queue := postgres.NewQueue(store, postgres.DefaultQueueConfig())
	caller := fleet.Identity{OrgID: "org-r", Username: "rita"}
	for _, name := range []string{"r-1", "r-2", "r-3"} {
		_, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}

	conn, err := pgx.Connect(ctx, cfg.DSN())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	lock, err := conn.Begin(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = lock.Exec(ctx, `LOCK TABLE hubs IN ACCESS EXCLUSIVE MODE`)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cut, cancel := context.WithTimeout(ctx, time.Second)
	lost, err := queue.ClaimRegistrations(cut, fleet.WorkProvision, "replica-r", 10, time.Minute)
	cancel()
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeUnavailable), "ClaimRegistrations cut short: %v", err)
	g.Expect(lock.Rollback(ctx)).To(gomega.Succeed())
	g.Expect(lost).To(gomega.HaveLen(3), "the claims a claim cut short still holds")
	token := lost[0].Token
	g.Expect(token).To(gomega.HavePrefix("replica-r/"))
	ids := make([]string, len(lost))
	for i, c := range lost {
		g.Expect(c.Token).To(gomega.Equal(token))
		ids[i] = c.Registration.ID
	}
	var held int
	g.Expect(db.Gorm.Raw(`SELECT count(*) FROM registrations WHERE id IN ? AND claimed_by = ?`, ids, token).Scan(&held).Error).To(gomega.Succeed())
	g.Expect(held).To(gomega.Equal(3), "rows the claim committed")

	// One row's lease ran out and another replica claimed it; another's
	// outcome was recorded under the token (its answer got through).
	freed, taken, recorded := lost[0].Registration.ID, lost[1].Registration.ID, lost[2].Registration.ID
	g.Expect(db.Gorm.Exec(`UPDATE registrations SET claimed_by = 'replica-s/other' WHERE id = ?`, taken).Error).To(gomega.Succeed())
	reg, err := store.FindRegistration(ctx, caller.OrgID, recorded)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	kept, err := queue.CompleteRegistrations(ctx, []fleet.Completion{{Token: token, Outcome: fleet.Outcome{ID: recorded,
		ObservedGeneration: reg.Generation, Conditions: reg.Conditions, RequeueAfter: time.Hour}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(kept).To(gomega.Equal([]bool{true}))

	n, err := queue.ReleaseRegistrations(ctx, token, ids)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal(1), "rows freed: only the one the claim still held")
	type row struct {
		ClaimedBy string
		Claimed   bool
		Due       bool
		Wait      float64
		Attempts  int
	}
	read := func(id string) row {
		t.Helper()
		var r row
		g.Expect(db.Gorm.Raw(`SELECT coalesce(claimed_by, '') AS claimed_by, claimed_until IS NOT NULL AS claimed, next_attempt_at <= now() AS due,
	extract(epoch FROM next_attempt_at - now())::float8 AS wait, attempts FROM registrations WHERE id = ?`, id).Scan(&r).Error).To(gomega.Succeed())
		return r
	}
	if r := read(freed); r.ClaimedBy != "" || r.Claimed || !r.Due || r.Attempts != 0 {
		t.Errorf("freed row = %+v; want unclaimed, due at once, no attempt counted", r)
	}
	if r := read(taken); r.ClaimedBy != "replica-s/other" || !r.Claimed {
		t.Errorf("row another claim took = %+v; want still that claim's", r)
	}
	if r := read(recorded); r.ClaimedBy != "" || r.Wait < 3000 {
		t.Errorf("recorded row = %+v; want its outcome kept (due in an hour)", r)
	}

	again, err := queue.ClaimRegistrations(ctx, fleet.WorkProvision, "replica-r", 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(again).To(gomega.HaveLen(1), "the next claim takes the freed row at once")
	g.Expect(again[0].Registration.ID).To(gomega.Equal(freed))
	g.Expect(again[0].Token).NotTo(gomega.Equal(token))
	g.Expect(strings.HasPrefix(again[0].Token, "replica-r/")).To(gomega.BeTrue())
	// A token frees nothing of a later claim of the same process.
	n, err = queue.ReleaseRegistrations(ctx, token, ids)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.BeZero(), "rows a stale token freed")
}

// TestPoolAndZoneClaimsAreFreedByTheirToken: pool_mgr and dns_mgr give
// each claim a token of its own as the claim's owner; freeing by that token
// clears exactly that claim's pools and zones, not another claim's whose
// token it starts like, nor a pass that was recorded.
func TestPoolAndZoneClaimsAreFreedByTheirToken(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	pools := []string{newPool(t, store, alice, "p0", 0, 1).ID, newPool(t, store, alice, "p1", 0, 1).ID, newPool(t, store, alice, "p2", 0, 1).ID}
	g.Expect(db.Gorm.Exec(`UPDATE capacity_pools SET next_pass_at = now() - interval '1 hour' WHERE id IN ?`, pools).Error).To(gomega.Succeed())
	_, s1 := mustDNSService(t, store, "one.example", "one")
	_, s2 := mustDNSService(t, store, "two.example", "two")
	mustDNSRecords(t, store, s1, "a")
	mustDNSRecords(t, store, s2, "b")

	lost, err := store.ClaimPools(ctx, "mgr/t1", []string{pools[0]}, 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lost).To(gomega.HaveLen(1))
	other, err := store.ClaimPools(ctx, "mgr/t10", []string{pools[1]}, 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(other).To(gomega.HaveLen(1))
	recorded, err := store.ClaimPools(ctx, "mgr/t1", []string{pools[2]}, 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(recorded).To(gomega.HaveLen(1))
	held, err := store.ApplyPoolPass(ctx, recorded[0], nil, time.Hour, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(held).To(gomega.BeTrue())
	n, err := store.ReleasePools(ctx, "mgr/t1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal(1), "pools freed: the one the claim still held")
	claimedBy := func(table, id string) string {
		var by *string
		g.Expect(db.Gorm.Raw(`SELECT claimed_by FROM `+table+` WHERE id = ?`, id).Scan(&by).Error).To(gomega.Succeed())
		if by == nil {
			return ""
		}
		return *by
	}
	g.Expect(claimedBy("capacity_pools", pools[0])).To(gomega.BeEmpty())
	g.Expect(claimedBy("capacity_pools", pools[1])).To(gomega.Equal(other[0].Token))
	again, err := store.ClaimPools(ctx, "mgr/t2", nil, 5, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(again).To(gomega.HaveLen(1), "the freed pool, due as it was, claimed again at once")
	g.Expect(again[0].Input.Pool.ID).To(gomega.Equal(pools[0]))

	zones, err := store.ClaimDNSZones(ctx, "mgr/t1", nil, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(zones).To(gomega.HaveLen(1))
	otherZones, err := store.ClaimDNSZones(ctx, "mgr/t10", nil, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(otherZones).To(gomega.HaveLen(1))
	n, err = store.ReleaseDNSZones(ctx, "mgr/t1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal(1))
	g.Expect(claimedBy("dns_zones", zones[0].Zone.Zone.ID)).To(gomega.BeEmpty())
	g.Expect(claimedBy("dns_zones", otherZones[0].Zone.Zone.ID)).To(gomega.Equal(otherZones[0].Token))
	zonesAgain, err := store.ClaimDNSZones(ctx, "mgr/t2", nil, 5, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(zonesAgain).To(gomega.HaveLen(1), "the freed zone, its record due, claimed again at once")
	g.Expect(zonesAgain[0].Zone.Zone.ID).To(gomega.Equal(zones[0].Zone.Zone.ID))
}
