package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// These tests drive dns_mgr's decisions with an in-process provider,
// resolver and queue: what the pass sends, splits and records. The real
// providers (BIND 9, the Route53 contract server) are driven through the
// binary by internal/e2e and by internal/dnsprovider's tests.

// fakeDNS is a provider that holds record sets by name, refuses the names
// in refuse, and does not answer while down; it is also the resolver of
// its one nameserver.
type fakeDNS struct {
	mu     sync.Mutex
	sets   map[string]fleet.DNSRecordSet
	refuse map[string]bool
	// elsewhere are the records whose names another owner holds.
	elsewhere map[string]bool
	down      bool
	pending   bool
	batches   [][]string
}

func (f *fakeDNS) Apply(_ context.Context, _ fleet.DNSZoneAccess, changes []fleet.DNSChange) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, c := range changes {
		names = append(names, c.RecordID)
	}
	f.batches = append(f.batches, names)
	if slices.ContainsFunc(names, func(n string) bool { return f.refuse[n] }) {
		return "", &fleet.DNSRefusal{Reason: "REFUSED"}
	}
	conflicts := map[string]string{}
	for _, n := range names {
		if f.elsewhere[n] {
			conflicts[n] = "the name's ownership record names another owner or record"
		}
	}
	if len(conflicts) > 0 {
		return "", &fleet.DNSRefusal{Reason: "names hold records this deployment does not own", Conflicts: conflicts}
	}
	if f.down {
		return "", errors.New("connection refused")
	}
	for _, c := range changes {
		if c.Upsert == nil {
			delete(f.sets, c.Previous.Name)
		} else {
			f.sets[c.Upsert.Name] = *c.Upsert
		}
	}
	if f.pending {
		return "change-1", nil
	}
	return "", nil
}

func (f *fakeDNS) Synced(context.Context, fleet.DNSZoneAccess, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.pending, nil
}

func (f *fakeDNS) Nameservers(context.Context, fleet.DNSZoneAccess) ([]string, error) {
	return []string{"127.0.0.1:53"}, nil
}

func (f *fakeDNS) Lookup(_ context.Context, _ string, name string, t fleet.DNSRecordType) ([]string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[name]
	if !ok || s.Type != t {
		return nil, false, nil
	}
	return s.Values, true, nil
}

// fakeDNSQueue records the outcomes of one pass.
type fakeDNSQueue struct {
	outs    []fleet.DNSOutcome
	zoneErr error
}

func (q *fakeDNSQueue) ClaimDNSZones(context.Context, string, []string, int, int, time.Duration) ([]fleet.DNSZoneClaim, error) {
	return nil, nil
}

func (q *fakeDNSQueue) ReleaseDNSZones(context.Context, string) (int, error) { return 0, nil }

func (q *fakeDNSQueue) CompleteDNSZone(_ context.Context, _ fleet.DNSZoneClaim, outs []fleet.DNSOutcome, zoneErr error) (bool, error) {
	q.outs, q.zoneErr = outs, zoneErr
	return true, nil
}

func newTestDNSManager(t *testing.T, p *fakeDNS, q *fakeDNSQueue) *DNSManager {
	t.Helper()
	metrics, err := NewMetrics("test", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return NewDNSManager(DefaultConfig(), q, map[fleet.DNSProviderKind]fleet.DNSProvider{fleet.DNSProviderRFC2136: p}, p,
		fleet.SystemClock{}, "test", slog.New(slog.NewTextHandler(io.Discard, nil)), metrics)
}

func dnsWork(id string, targets ...string) fleet.DNSWork {
	return fleet.DNSWork{Record: fleet.DNSRecord{ID: id, Name: id + ".svc.example.com", Type: fleet.DNSRecordA, TTL: 60,
		Targets: targets, Generation: 1}}
}

func dnsClaim(works ...fleet.DNSWork) fleet.DNSZoneClaim {
	return fleet.DNSZoneClaim{Token: "t", Zone: fleet.DNSZoneAccess{Zone: fleet.DNSZone{ID: "z", Name: "example.com",
		Provider: fleet.DNSProviderRFC2136}}, Records: works}
}

func outcome(outs []fleet.DNSOutcome, id string) fleet.DNSOutcome {
	i := slices.IndexFunc(outs, func(o fleet.DNSOutcome) bool { return o.ID == id })
	if i < 0 {
		return fleet.DNSOutcome{}
	}
	return outs[i]
}

// TestDNSManagerLeavesANameOwnedElsewhere checks that a record whose name
// the provider says another owner holds fails with NameOwnedElsewhere,
// retried with backoff, and that the batch's other records are sent again
// without it at once, not split.
func TestDNSManagerLeavesANameOwnedElsewhere(t *testing.T) {
	g := gomega.NewWithT(t)
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{}, elsewhere: map[string]bool{"r2": true}}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	var works []fleet.DNSWork
	for _, id := range []string{"r0", "r1", "r2", "r3"} {
		works = append(works, dnsWork(id, "192.0.2.10"))
	}
	m.reconcileZone(context.Background(), dnsClaim(works...), time.Now().Add(time.Minute))
	g.Expect(q.zoneErr).NotTo(gomega.HaveOccurred())
	g.Expect(p.batches).To(gomega.Equal([][]string{{"r0", "r1", "r2", "r3"}, {"r0", "r1", "r3"}}))
	o := outcome(q.outs, "r2")
	g.Expect(o.Failed).To(gomega.BeTrue())
	g.Expect(o.Publish).To(gomega.BeFalse())
	g.Expect(o.RequeueAfter).To(gomega.Equal(dnsFirstRetry))
	g.Expect(o.Conditions.Reason(fleet.DNSConditionPublished)).To(gomega.Equal(fleet.DNSReasonNameOwnedElsewhere))
	c, _ := o.Conditions.Get(fleet.DNSConditionPublished)
	g.Expect(c.Message).To(gomega.ContainSubstring("names another owner"))
	g.Expect(fleet.DNSRecordPhase(o.Conditions, false)).To(gomega.Equal(fleet.DNSPhaseFailed))
	for _, id := range []string{"r0", "r1", "r3"} {
		g.Expect(outcome(q.outs, id).Publish).To(gomega.BeTrue(), id)
		g.Expect(fleet.DNSRecordPhase(outcome(q.outs, id).Conditions, false)).To(gomega.Equal(fleet.DNSPhaseReady), id)
	}
	g.Expect(testutil.ToFloat64(m.metrics.dnsChanges.WithLabelValues(string(fleet.DNSProviderRFC2136), dnsOwnedElsewhere))).To(gomega.Equal(1.0))
}

// TestDNSManagerIsolatesARefusedRecord checks that a batch with one record
// the provider refuses publishes every other record, and fails that one
// alone, after splitting the batch.
func TestDNSManagerIsolatesARefusedRecord(t *testing.T) {
	g := gomega.NewWithT(t)
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{}, refuse: map[string]bool{"r5": true}}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	var works []fleet.DNSWork
	for _, id := range []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"} {
		works = append(works, dnsWork(id, "192.0.2.10"))
	}
	m.reconcileZone(context.Background(), dnsClaim(works...), time.Now().Add(time.Minute))
	g.Expect(q.zoneErr).NotTo(gomega.HaveOccurred())
	for _, o := range q.outs {
		if o.ID == "r5" {
			g.Expect(o.Failed).To(gomega.BeTrue())
			g.Expect(o.Publish).To(gomega.BeFalse())
			g.Expect(o.Conditions.Reason(fleet.DNSConditionPublished)).To(gomega.Equal(fleet.DNSReasonProviderRefused))
			g.Expect(fleet.DNSRecordPhase(o.Conditions, false)).To(gomega.Equal(fleet.DNSPhaseFailed))
			continue
		}
		g.Expect(o.Publish).To(gomega.BeTrue(), o.ID)
		g.Expect(o.Conditions.IsTrue(fleet.DNSConditionResolvable)).To(gomega.BeTrue(), o.ID)
		g.Expect(fleet.DNSRecordPhase(o.Conditions, false)).To(gomega.Equal(fleet.DNSPhaseReady), o.ID)
	}
	g.Expect(p.sets).To(gomega.HaveLen(7))
	// 8 → 4+4 → the refused half splits to 2+2 → 1+1: a handful of
	// batches, not one per record.
	g.Expect(len(p.batches)).To(gomega.BeNumerically("<", 8))
	g.Expect(p.batches[0]).To(gomega.HaveLen(8))
}

// TestDNSManagerProviderOutage checks that a provider that does not answer
// fails the zone's pass, leaves nothing marked published, and backs each
// record off; the next pass publishes them.
func TestDNSManagerProviderOutage(t *testing.T) {
	g := gomega.NewWithT(t)
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{}, down: true}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	w := dnsWork("r0", "192.0.2.10")
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	g.Expect(q.zoneErr).To(gomega.HaveOccurred())
	o := outcome(q.outs, "r0")
	g.Expect(o.Failed).To(gomega.BeTrue())
	g.Expect(o.RequeueAfter).To(gomega.Equal(dnsFirstRetry))
	g.Expect(o.Conditions.Reason(fleet.DNSConditionPublished)).To(gomega.Equal(fleet.DNSReasonProviderUnavailable))
	published, _ := o.Conditions.Get(fleet.DNSConditionPublished)
	g.Expect(published.Message).NotTo(gomega.ContainSubstring("connection refused"), "the provider's error stays in the logs")

	p.down = false
	w.Attempts = 1
	w.Record.Conditions = o.Conditions
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	g.Expect(q.zoneErr).NotTo(gomega.HaveOccurred())
	g.Expect(outcome(q.outs, "r0").Conditions.IsTrue(fleet.DNSConditionResolvable)).To(gomega.BeTrue())
	g.Expect(dnsRetry(1)).To(gomega.Equal(2 * dnsFirstRetry))
	g.Expect(dnsRetry(100)).To(gomega.Equal(dnsMaxRetry))
}

// TestDNSManagerDeletes checks a deletion: a record never published goes
// at once; a published one goes once the provider removed it, and stays
// while the provider is down.
func TestDNSManagerDeletes(t *testing.T) {
	g := gomega.NewWithT(t)
	set := fleet.DNSRecordSet{Name: "r1.svc.example.com", Type: fleet.DNSRecordA, TTL: 60, Values: []string{"192.0.2.10"}}
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{set.Name: set}, down: true}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	now := time.Now()
	never, published := dnsWork("r0", "192.0.2.10"), dnsWork("r1", "192.0.2.10")
	never.Record.DeletionRequestedAt, published.Record.DeletionRequestedAt = &now, &now
	published.Published = &set
	m.reconcileZone(context.Background(), dnsClaim(never, published), time.Now().Add(time.Minute))
	g.Expect(outcome(q.outs, "r0").Delete).To(gomega.BeTrue())
	g.Expect(outcome(q.outs, "r1").Delete).To(gomega.BeFalse())
	g.Expect(p.sets).To(gomega.HaveKey(set.Name))

	p.down = false
	m.reconcileZone(context.Background(), dnsClaim(published), time.Now().Add(time.Minute))
	g.Expect(outcome(q.outs, "r1").Delete).To(gomega.BeTrue())
	g.Expect(p.sets).NotTo(gomega.HaveKey(set.Name))
}

// TestDNSManagerFollowsACluster checks a record that follows a pool
// cluster: it waits for the ingress, then publishes a CNAME to it, and
// moves when the ingress moves.
func TestDNSManagerFollowsACluster(t *testing.T) {
	g := gomega.NewWithT(t)
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{}}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	w := fleet.DNSWork{Record: fleet.DNSRecord{ID: "r0", Name: "r0.svc.example.com", Type: fleet.DNSRecordCNAME, TTL: 60,
		ClusterID: "c1", Generation: 1}}
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	o := outcome(q.outs, "r0")
	g.Expect(o.Conditions.Reason(fleet.DNSConditionPublished)).To(gomega.Equal(fleet.DNSReasonWaitingForCluster))
	g.Expect(o.RequeueAfter).To(gomega.Equal(DefaultConfig().DNSResync))
	g.Expect(p.batches).To(gomega.BeEmpty())

	w.IngressHost = "router-default.apps.c1.clusters.example.com"
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	o = outcome(q.outs, "r0")
	g.Expect(o.Published).To(gomega.HaveField("Values", []string{w.IngressHost}))
	g.Expect(fleet.DNSRecordPhase(o.Conditions, false)).To(gomega.Equal(fleet.DNSPhaseReady))

	w.Published, w.IngressHost = o.Published, "router-default.apps.c1b.clusters.example.com"
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	g.Expect(p.sets["r0.svc.example.com"].Values).To(gomega.Equal([]string{w.IngressHost}))

	w.ClusterGone = true
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	g.Expect(fleet.DNSRecordPhase(outcome(q.outs, "r0").Conditions, false)).To(gomega.Equal(fleet.DNSPhaseFailed))
}

// TestDNSManagerWaitsForTheProviderSync checks that a change the provider
// has not synced leaves Resolvable false (published phase), and that the
// pass after the sync clears the change id.
func TestDNSManagerWaitsForTheProviderSync(t *testing.T) {
	g := gomega.NewWithT(t)
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{}, pending: true}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	w := dnsWork("r0", "2001:db8::1")
	w.Record.Type = fleet.DNSRecordAAAA
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	o := outcome(q.outs, "r0")
	g.Expect(o.ChangeID).To(gomega.Equal("change-1"))
	g.Expect(o.Synced).To(gomega.BeFalse())
	g.Expect(fleet.DNSRecordPhase(o.Conditions, false)).To(gomega.Equal(fleet.DNSPhasePublished))

	p.pending = false
	// The provider answers the address spelled otherwise: still the same.
	p.sets[w.Record.Name] = fleet.DNSRecordSet{Name: w.Record.Name, Type: fleet.DNSRecordAAAA, TTL: 60, Values: []string{"2001:0db8:0::1"}}
	w.Published, w.PublishedGeneration, w.ChangeID, w.Record.Conditions = o.Published, 1, o.ChangeID, o.Conditions
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	o = outcome(q.outs, "r0")
	g.Expect(o.Synced).To(gomega.BeTrue())
	g.Expect(fleet.DNSRecordPhase(o.Conditions, false)).To(gomega.Equal(fleet.DNSPhaseReady))
	g.Expect(p.batches).To(gomega.HaveLen(1), "an unchanged record is not sent again")
}

// TestDNSManagerRemovesOnceSynced checks that a record removed by a change
// the provider syncs later goes only once that change is synced.
func TestDNSManagerRemovesOnceSynced(t *testing.T) {
	g := gomega.NewWithT(t)
	set := fleet.DNSRecordSet{Name: "r0.svc.example.com", Type: fleet.DNSRecordA, TTL: 60, Values: []string{"192.0.2.10"}}
	p := &fakeDNS{sets: map[string]fleet.DNSRecordSet{set.Name: set}, pending: true}
	q := &fakeDNSQueue{}
	m := newTestDNSManager(t, p, q)
	now := time.Now()
	w := dnsWork("r0", "192.0.2.10")
	w.Record.DeletionRequestedAt, w.Published = &now, &set
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	o := outcome(q.outs, "r0")
	g.Expect(o.Delete).To(gomega.BeFalse(), "the removal is not synced yet")
	g.Expect(o.Publish).To(gomega.BeTrue())
	g.Expect(o.Published).To(gomega.BeNil())
	g.Expect(o.ChangeID).To(gomega.Equal("change-1"))
	g.Expect(o.RequeueAfter).To(gomega.BeNumerically(">", 0))

	w.Published, w.ChangeID = nil, o.ChangeID
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	g.Expect(outcome(q.outs, "r0").Delete).To(gomega.BeFalse())
	p.pending = false
	m.reconcileZone(context.Background(), dnsClaim(w), time.Now().Add(time.Minute))
	g.Expect(outcome(q.outs, "r0").Delete).To(gomega.BeTrue())
	g.Expect(p.batches).To(gomega.HaveLen(1), "the removal is sent once")
}
