package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// dnsClaimed is, per claimed zone id, its records' instances in order.
func dnsClaimed(claims []fleet.DNSZoneClaim) map[string][]string {
	out := map[string][]string{}
	for _, c := range claims {
		out[c.Zone.Zone.ID] = []string{}
		for _, w := range c.Records {
			out[c.Zone.Zone.ID] = append(out[c.Zone.Zone.ID], w.Record.Instance)
		}
	}
	return out
}

// mustDNSRecords creates org-a's records of instances in service.
func mustDNSRecords(t *testing.T, store *postgres.Store, service fleet.DNSService, instances ...string) []fleet.DNSRecord {
	t.Helper()
	var out []fleet.DNSRecord
	for _, i := range instances {
		r, _, err := store.CreateDNSRecord(context.Background(), fleet.Identity{OrgID: "org-a"}, service.Name,
			fleet.DNSRecordCreate{Instance: i, Targets: []string{"lb.example.net"}})
		if err != nil {
			t.Fatalf("CreateDNSRecord(%s) = %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

// dnsRecordQueue is a record's queue columns as stored: its attempts and
// how many seconds from now it is due (nil: no pass due).
type dnsRecordQueue struct {
	Attempts  int
	DueIn     *float64
	Deleted   bool
	ChangeID  string
	Published *string
	PubGen    int64
	Phase     string
	LastError string
}

func readDNSQueue(t *testing.T, db *postgres.DB, id string) dnsRecordQueue {
	t.Helper()
	var q dnsRecordQueue
	err := db.Gorm.Raw(`SELECT attempts, extract(epoch FROM next_pass_at - now())::float8 AS due_in, deleted_at IS NOT NULL AS deleted,
	change_id, published::text AS published, published_generation AS pub_gen, phase, last_error FROM dns_records WHERE id = ?`, id).Scan(&q).Error
	if err != nil {
		t.Fatalf("reading record %s: %v", id, err)
	}
	return q
}

func TestClaimDNSZonesLeasesEachZoneToOneOwner(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	z1, s1 := mustDNSService(t, store, "one.example", "one")
	z2, s2 := mustDNSService(t, store, "two.example", "two")
	z3, _ := mustDNSService(t, store, "three.example", "three")
	mustDNSRecords(t, store, s1, "a", "b", "c")
	mustDNSRecords(t, store, s2, "d")

	claims, err := store.ClaimDNSZones(ctx, "mgr-1", nil, 10, 2, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(dnsClaimed(claims)).To(gomega.Equal(map[string][]string{z1.ID: {"a", "b"}, z2.ID: {"d"}}),
		"the zones with due records, a batch of each, oldest due first")
	for _, c := range claims {
		g.Expect(c.Token).To(gomega.HavePrefix("mgr-1/"))
		g.Expect(c.Zone.Zone.HasCredentials).To(gomega.BeTrue())
	}
	others, err := store.ClaimDNSZones(ctx, "mgr-2", []string{z1.ID, z3.ID}, 10, 2, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(dnsClaimed(others)).To(gomega.Equal(map[string][]string{z3.ID: {}}), "leased zones are not claimed again; a woken one is, due or not")

	// Released, the woken zone comes first.
	for _, c := range append(claims, others...) {
		held, err := store.CompleteDNSZone(ctx, c, nil, nil)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(held).To(gomega.BeTrue())
	}
	first, err := store.ClaimDNSZones(ctx, "mgr-2", []string{z2.ID}, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(dnsClaimed(first)).To(gomega.Equal(map[string][]string{z2.ID: {"d"}}))
	next, err := store.ClaimDNSZones(ctx, "mgr-2", nil, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(dnsClaimed(next)).To(gomega.Equal(map[string][]string{z1.ID: {"a", "b", "c"}}))

	// A lease that ended is another owner's to take; the first owner's
	// completion then writes nothing.
	g.Expect(db.Gorm.Exec(`UPDATE dns_zones SET claimed_until = now() - interval '1 second' WHERE id = ?`, z1.ID).Error).To(gomega.Succeed())
	taken, err := store.ClaimDNSZones(ctx, "mgr-3", nil, 10, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(dnsClaimed(taken)).To(gomega.Equal(map[string][]string{z1.ID: {"a", "b", "c"}}))
	a := next[0].Records[0]
	held, err := store.CompleteDNSZone(ctx, next[0], []fleet.DNSOutcome{{ID: a.Record.ID, Generation: a.Record.Generation,
		Publish: true, Published: &fleet.DNSRecordSet{Name: a.Record.Name, Type: fleet.DNSRecordCNAME, TTL: 300, Values: []string{"lb.example.net"}},
		PublishedGeneration: 1}}, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(held).To(gomega.BeFalse())
	g.Expect(readDNSQueue(t, db, a.Record.ID).Published).To(gomega.BeNil(), "a lost claim writes nothing")

	// A provider outage backs the zone off, woken or not.
	held, err = store.CompleteDNSZone(ctx, taken[0], nil, errors.New("connection refused"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(held).To(gomega.BeTrue())
	var zone struct {
		Attempts  int
		LastError string
		Backoff   float64
	}
	g.Expect(db.Gorm.Raw(`SELECT attempts, last_error, extract(epoch FROM next_pass_at - now())::float8 AS backoff FROM dns_zones WHERE id = ?`, z1.ID).
		Scan(&zone).Error).To(gomega.Succeed())
	g.Expect(zone.Attempts).To(gomega.Equal(1))
	g.Expect(zone.LastError).To(gomega.Equal("connection refused"))
	g.Expect(zone.Backoff).To(gomega.BeNumerically("~", 1, 0.5))
	backedOff, err := store.ClaimDNSZones(ctx, "mgr-3", []string{z1.ID}, 10, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(backedOff).To(gomega.BeEmpty())
	g.Eventually(func(g gomega.Gomega) {
		again, err := store.ClaimDNSZones(ctx, "mgr-3", nil, 10, 10, time.Minute)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(dnsClaimed(again)).To(gomega.HaveKey(z1.ID))
		g.Expect(again[0].Attempts).To(gomega.Equal(1))
	}).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
}

func TestCompleteDNSZoneRecordsEachOutcome(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, func(c *postgres.StoreConfig) { c.DNSResync = 10 * time.Minute })
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a")
	seedPoolCluster(t, db, "org-a", "cl-a", "https://console-openshift-console.apps.c1.example.net")
	recs := mustDNSRecords(t, store, shop, "synced", "failed", "changed", "deleted", "waiting")
	follower, _, err := store.CreateDNSRecord(ctx, fleet.Identity{OrgID: "org-a"}, shop.Name, fleet.DNSRecordCreate{Instance: "follower", ClusterID: "cl-a"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, "org-a", shop.Name, recs[3].ID, nil)).To(gomega.Succeed())

	claims, err := store.ClaimDNSZones(ctx, "mgr", nil, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(1))
	work := map[string]fleet.DNSWork{}
	for _, w := range claims[0].Records {
		work[w.Record.Instance] = w
	}
	g.Expect(work).To(gomega.HaveLen(6))
	g.Expect(work["follower"].IngressHost).To(gomega.Equal("router-default.apps.c1.example.net"))
	g.Expect(work["deleted"].Record.DeletionRequestedAt).NotTo(gomega.BeNil())

	// The changed record moves on while the pass runs.
	ttl := 60
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, "org-a", shop.Name, recs[2].ID, nil, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	now := time.Now()
	set := func(w fleet.DNSWork) *fleet.DNSRecordSet {
		return &fleet.DNSRecordSet{Name: w.Record.Name, Type: w.Record.Type, TTL: w.Record.TTL, Values: []string{"lb.example.net"}}
	}
	published := func(w fleet.DNSWork) fleet.Conditions {
		return w.Record.Conditions.MarkTrue(fleet.DNSConditionPublished, fleet.DNSReasonPublished, "", w.Record.Generation, now)
	}
	refused := work["failed"].Record.Conditions.MarkFalse(fleet.DNSConditionPublished, fleet.DNSReasonProviderRefused, "REFUSED by the server", 1, now)
	outcomes := []fleet.DNSOutcome{
		{ID: work["synced"].Record.ID, Generation: 1, Conditions: published(work["synced"]).MarkTrue(fleet.DNSConditionResolvable, fleet.DNSReasonAnswered, "", 1, now),
			Publish: true, Published: set(work["synced"]), PublishedGeneration: 1, ChangeID: "C1", Synced: true},
		{ID: work["failed"].Record.ID, Generation: 1, Conditions: refused, Failed: true},
		{ID: work["changed"].Record.ID, Generation: 1, Conditions: published(work["changed"]), Publish: true, Published: set(work["changed"]),
			PublishedGeneration: 1, ChangeID: "C2", RequeueAfter: time.Second},
		{ID: work["deleted"].Record.ID, Generation: work["deleted"].Record.Generation, Conditions: work["deleted"].Record.Conditions,
			Publish: true, Published: nil, PublishedGeneration: work["deleted"].Record.Generation, Delete: true},
		{ID: work["waiting"].Record.ID, Generation: 1, Conditions: published(work["waiting"]), Publish: true, Published: set(work["waiting"]),
			PublishedGeneration: 1, ChangeID: "C3", RequeueAfter: 30 * time.Second},
		{ID: follower.ID, Generation: 1, Conditions: published(work["follower"]), Publish: true, Published: set(work["follower"]), PublishedGeneration: 1},
	}
	held, err := store.CompleteDNSZone(ctx, claims[0], outcomes, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(held).To(gomega.BeTrue())

	synced := readDNSQueue(t, db, recs[0].ID)
	g.Expect(synced.DueIn).To(gomega.BeNil(), "nothing is due of a record at rest")
	g.Expect(synced.ChangeID).To(gomega.BeEmpty())
	g.Expect(synced.PubGen).To(gomega.Equal(int64(1)))
	g.Expect(synced.Phase).To(gomega.Equal(fleet.DNSPhaseReady))
	r, err := store.FindDNSRecord(ctx, "org-a", shop, recs[0].ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(r.Values).To(gomega.Equal([]string{"lb.example.net"}))
	g.Expect(r.Phase()).To(gomega.Equal(fleet.DNSPhaseReady))

	failed := readDNSQueue(t, db, recs[1].ID)
	g.Expect(failed.Attempts).To(gomega.Equal(1))
	g.Expect(*failed.DueIn).To(gomega.BeNumerically("~", 1, 0.5), "the first failure backs off a second")
	g.Expect(failed.Phase).To(gomega.Equal(fleet.DNSPhaseFailed))
	g.Expect(failed.LastError).To(gomega.Equal("REFUSED by the server"))

	changed := readDNSQueue(t, db, recs[2].ID)
	g.Expect(*changed.DueIn).To(gomega.BeNumerically("<=", 0), "a record changed during the pass stays due")
	g.Expect(changed.Phase).To(gomega.Equal(fleet.DNSPhasePending))
	g.Expect(changed.PubGen).To(gomega.Equal(int64(1)), "what the provider holds is recorded all the same")
	g.Expect(changed.ChangeID).To(gomega.Equal("C2"))
	g.Expect(changed.Published).NotTo(gomega.BeNil())

	g.Expect(readDNSQueue(t, db, recs[3].ID).Deleted).To(gomega.BeTrue())
	_, err = store.FindDNSRecord(ctx, "org-a", shop, recs[3].ID)
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	_, created, err := store.CreateDNSRecord(ctx, fleet.Identity{OrgID: "org-a"}, shop.Name, fleet.DNSRecordCreate{Instance: "deleted", Targets: []string{"lb.example.net"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created).To(gomega.BeTrue(), "the name is free once the removal is published")

	waiting := readDNSQueue(t, db, recs[4].ID)
	g.Expect(*waiting.DueIn).To(gomega.BeNumerically("~", 30, 2))
	g.Expect(waiting.ChangeID).To(gomega.Equal("C3"))
	g.Expect(waiting.Phase).To(gomega.Equal(fleet.DNSPhasePublished))
	g.Expect(*readDNSQueue(t, db, follower.ID).DueIn).To(gomega.BeNumerically("~", 600, 2), "a record that follows a cluster resyncs")

	// A second failure doubles the backoff.
	g.Expect(db.Gorm.Exec(`UPDATE dns_records SET next_pass_at = now() WHERE id = ?`, recs[1].ID).Error).To(gomega.Succeed())
	again, err := store.ClaimDNSZones(ctx, "mgr", nil, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var failing fleet.DNSWork
	for _, w := range again[0].Records {
		if w.Record.ID == recs[1].ID {
			failing = w
		}
	}
	g.Expect(failing.Attempts).To(gomega.Equal(1))
	_, err = store.CompleteDNSZone(ctx, again[0], []fleet.DNSOutcome{{ID: recs[1].ID, Generation: 1, Conditions: refused, Failed: true}}, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	failed = readDNSQueue(t, db, recs[1].ID)
	g.Expect(failed.Attempts).To(gomega.Equal(2))
	g.Expect(*failed.DueIn).To(gomega.BeNumerically("~", 2, 0.5))
}

func TestClaimDNSZonesReadsTheClustersRecordsFollow(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a")
	seedPoolCluster(t, db, "org-a", "cl-ready", "https://console-openshift-console.apps.ready.example.net")
	seedPoolCluster(t, db, "org-a", "cl-new", "")
	seedPoolCluster(t, db, "org-a", "cl-removed", "https://console-openshift-console.apps.removed.example.net")
	seedPoolCluster(t, db, "org-a", "cl-deregistered", "https://console-openshift-console.apps.dereg.example.net")
	seedPoolCluster(t, db, "org-a", "cl-moved", "https://console-openshift-console.apps.moved.example.net")
	for _, cluster := range []string{"cl-ready", "cl-new", "cl-removed", "cl-deregistered", "cl-moved"} {
		_, _, err := store.CreateDNSRecord(ctx, fleet.Identity{OrgID: "org-a"}, shop.Name, fleet.DNSRecordCreate{Instance: cluster, ClusterID: cluster})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	mustDNSRecords(t, store, shop, "plain")
	g.Expect(db.Gorm.Exec(`UPDATE pool_clusters SET removing = true WHERE registration_id = 'cl-removed'`).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE registrations SET deleted_at = now() WHERE id = 'cl-deregistered'`).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE pool_clusters SET org_id = 'org-b' WHERE registration_id = 'cl-moved'`).Error).To(gomega.Succeed())

	claims, err := store.ClaimDNSZones(ctx, "mgr", nil, 1, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(1))
	type seen struct {
		Host string
		Gone bool
	}
	got := map[string]seen{}
	for _, w := range claims[0].Records {
		got[w.Record.Instance] = seen{w.IngressHost, w.ClusterGone}
		g.Expect(w.Record.ServiceName).To(gomega.Equal("shop"))
	}
	g.Expect(got).To(gomega.Equal(map[string]seen{
		"cl-ready":        {"router-default.apps.ready.example.net", false},
		"cl-new":          {"", false},
		"cl-removed":      {"", true},
		"cl-deregistered": {"", true},
		"cl-moved":        {"", true},
		"plain":           {"", false},
	}))
}

// TestDNSRecordWritesWakeDNSManager listens on ChannelDNS: each write that
// makes a record due wakes dns_mgr with the record's zone.
func TestDNSRecordWritesWakeDNSManager(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, cfg := pgtest.NewMigratedDatabase(t)
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	zone, shop := mustDNSService(t, store, "example.com", "shop", "org-a")
	listener := postgres.NewListener(cfg, slog.New(slog.DiscardHandler), postgres.ChannelDNS)
	woken := listener.Subscribe(postgres.ChannelDNS)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { listener.Run(lctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// wokenWith waits for payload on woken, past any other wake-up.
	wokenWith := func(payload, after string) {
		t.Helper()
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(woken).To(gomega.Receive(gomega.Equal(payload)))
		}).WithTimeout(5*time.Second).WithPolling(10*time.Millisecond).Should(gomega.Succeed(), after)
	}
	wokenWith("", "the listener connects")

	rec := mustDNSRecords(t, store, shop, "i1")[0]
	wokenWith(zone.ID, "CreateDNSRecord")
	ttl := 60
	_, err := store.UpdateDNSRecord(ctx, fleet.Permitted, "org-a", shop.Name, rec.ID, nil, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wokenWith(zone.ID, "UpdateDNSRecord")
	g.Expect(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, "org-a", shop.Name, rec.ID, nil)).To(gomega.Succeed())
	wokenWith(zone.ID, "RequestDNSRecordDeletion")
}

// TestDNSServiceRecordCountsFollowTheRecords checks the counters the
// services' reads answer from: a create adds, a removal dns_mgr completes
// takes off, a record asked to be deleted still counts until then, and
// another service's records are its own.
func TestDNSServiceRecordCountsFollowTheRecords(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	_, s1 := mustDNSService(t, store, "count-one.example", "count-one")
	_, s2 := mustDNSService(t, store, "count-two.example", "count-two")
	recs := mustDNSRecords(t, store, s1, "a", "b", "c", "d")
	mustDNSRecords(t, store, s2, "e")
	count := func(id string) int {
		s, err := store.FindDNSService(ctx, id)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return s.Records
	}
	g.Expect(count(s1.ID)).To(gomega.Equal(4))
	g.Expect(count(s2.ID)).To(gomega.Equal(1))

	for _, r := range recs[:2] {
		g.Expect(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, "org-a", s1.Name, r.ID, nil)).To(gomega.Succeed())
	}
	g.Expect(count(s1.ID)).To(gomega.Equal(4), "a record being deleted is still live")
	claims, err := store.ClaimDNSZones(ctx, "mgr", nil, 10, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, c := range claims {
		var outs []fleet.DNSOutcome
		for _, w := range c.Records {
			outs = append(outs, fleet.DNSOutcome{ID: w.Record.ID, Generation: w.Record.Generation, Conditions: w.Record.Conditions,
				Delete: w.Record.DeletionRequestedAt != nil})
		}
		_, err := store.CompleteDNSZone(ctx, c, outs, nil)
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	g.Expect(count(s1.ID)).To(gomega.Equal(2))
	list, _, err := store.ListDNSServices(ctx, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	byName := map[string]int{}
	for _, s := range list {
		byName[s.Name] = s.Records
	}
	g.Expect(byName).To(gomega.HaveKeyWithValue("count-one", 2))
	g.Expect(byName).To(gomega.HaveKeyWithValue("count-two", 1))
	g.Expect(fleet.ErrorCodeOf(store.DeleteDNSService(ctx, s2.ID, nil))).To(gomega.Equal(fleet.CodeConflict), "a service with a live record stays")
}

// TestStoredDNSPhaseFollowsTheOneRule: the phase column a search reads is
// the one fleet.DNSRecordPhase derives, whichever write stored it: a record
// whose deletion was requested stays deleting after a pass whose removal the
// provider refused, which alone would read failed.
func TestStoredDNSPhaseFollowsTheOneRule(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	_, svc := mustDNSService(t, store, "phase.example", "phase")
	recs := mustDNSRecords(t, store, svc, "kept", "removed")
	org := recs[0].OrgID
	g.Expect(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, org, svc.Name, recs[1].ID, nil)).To(gomega.Succeed())

	claims, err := store.ClaimDNSZones(ctx, "mgr-1", nil, 10, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(1))
	refused := fleet.Conditions{{Type: fleet.DNSConditionPublished, Status: fleet.ConditionFalse, Reason: fleet.DNSReasonProviderRefused}}
	var outcomes []fleet.DNSOutcome
	for _, w := range claims[0].Records {
		outcomes = append(outcomes, fleet.DNSOutcome{ID: w.Record.ID, Generation: w.Record.Generation, Conditions: refused, Failed: true})
	}
	g.Expect(outcomes).To(gomega.HaveLen(2))
	held, err := store.CompleteDNSZone(ctx, claims[0], outcomes, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(held).To(gomega.BeTrue())

	for phase, want := range map[string][]string{fleet.DNSPhaseFailed: {recs[0].ID}, fleet.DNSPhaseDeleting: {recs[1].ID}} {
		found, _, err := store.ListDNSRecords(ctx, org, svc, fleet.ListQuery{Search: "phase = '" + phase + "'"})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var ids []string
		for _, r := range found {
			ids = append(ids, r.ID)
		}
		g.Expect(ids).To(gomega.Equal(want), "the records stored as %s", phase)
	}
}
