package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/dnstest"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/provisiontest"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// dnsFlags make dns_mgr look again soon in the tests.
var dnsFlags = []string{"--dns-resync-interval=500ms"}

// dnsFleet is a fleet manager with one zone onboarded, two services in it
// (kafka, written by org-kafka; redis, written by redis's service account)
// and the tokens of their writers and of an organisation that writes none.
type dnsFleet struct {
	t      *testing.T
	g      gomega.Gomega
	fm     *fleetManager
	admin  string
	kafka  string // org-kafka's member
	redis  string // redis's service account, of org-redis
	nobody string // org-nobody's admin: a writer of no service
	zoneID string
	// server answers the zone authoritatively.
	server string
}

// onboardDNS starts a fleet manager and onboards zone with its services.
func onboardDNS(t *testing.T, zone admin.DNSZoneCreate, server string) *dnsFleet {
	t.Helper()
	fm := startFleetManager(t, hydratest.Start(t), dnsFlags...)
	d := &dnsFleet{t: t, g: gomega.NewWithT(t), fm: fm, server: server,
		admin: fm.token("sre", "bob", "fleet-admin"), kafka: fm.token("org-kafka", "ann", "org-member"),
		redis: fm.token("org-redis", "service-account-redis-fleet-manager"), nobody: fm.token("org-nobody", "eve")}
	ctx := context.Background()
	created, err := fm.Admin.CreateDNSZoneWithResponse(ctx, zone, bearer(d.admin))
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateDNSZone = %d %s, %v", created.StatusCode(), created.Body, err)
	}
	d.zoneID = created.JSON201.Id
	if zone.Credentials != nil {
		for _, secret := range []*string{zone.Credentials.TsigSecret, zone.Credentials.SecretAccessKey} {
			if secret != nil {
				d.g.Expect(string(created.Body)).NotTo(gomega.ContainSubstring(*secret), "a zone's answer holds its secret")
			}
		}
		d.g.Expect(created.JSON201.HasCredentials).To(gomega.BeTrue())
	}
	for _, svc := range []admin.DNSServiceCreate{
		{Name: "kafka", ZoneId: d.zoneID, WriterOrganizations: &[]string{"org-kafka"}, MinTtl: ptr(30), DefaultTtl: ptr(60)},
		{Name: "redis", ZoneId: d.zoneID, NameTemplate: ptr("{instance}-rw"),
			WriterServiceAccounts: &[]string{"service-account-redis-fleet-manager"}},
	} {
		resp, err := fm.Admin.CreateDNSServiceWithResponse(ctx, svc, bearer(d.admin))
		if err != nil || resp.JSON201 == nil {
			t.Fatalf("CreateDNSService(%s) = %d %s, %v", svc.Name, resp.StatusCode(), resp.Body, err)
		}
	}
	return d
}

// create asks for a record as token and returns the answer's status and record.
func (d *dnsFleet) create(token, service string, c public.DNSRecordCreate) (int, public.DNSRecord, string) {
	d.t.Helper()
	resp, err := d.fm.Public.CreateDNSRecordWithResponse(context.Background(), service, c, bearer(token))
	d.g.Expect(err).NotTo(gomega.HaveOccurred())
	var rec public.DNSRecord
	switch {
	case resp.JSON201 != nil:
		rec = *resp.JSON201
	case resp.JSON200 != nil:
		rec = *resp.JSON200
	}
	return resp.StatusCode(), rec, string(resp.Body)
}

// mustCreate creates a record as kafka's writer.
func (d *dnsFleet) mustCreate(c public.DNSRecordCreate) public.DNSRecord {
	d.t.Helper()
	code, rec, body := d.create(d.kafka, "kafka", c)
	d.g.Expect(code).To(gomega.Equal(http.StatusCreated), body)
	return rec
}

// get reads a record as token: its status and the record.
func (d *dnsFleet) get(token, service, id string) (int, public.DNSRecord) {
	resp, err := d.fm.Public.GetDNSRecordWithResponse(context.Background(), service, id, bearer(token))
	if err != nil || resp.JSON200 == nil {
		return resp.StatusCode(), public.DNSRecord{}
	}
	return http.StatusOK, *resp.JSON200
}

// waitPhase waits for kafka's record id to reach phase with its values.
func (d *dnsFleet) waitPhase(id string, phase public.DNSRecordPhase, timeout time.Duration) public.DNSRecord {
	d.t.Helper()
	var last public.DNSRecord
	d.g.Eventually(func(g gomega.Gomega) {
		code, rec := d.get(d.kafka, "kafka", id)
		last = rec
		g.Expect(code).To(gomega.Equal(http.StatusOK))
		g.Expect(rec.Phase).To(gomega.Equal(phase))
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(gomega.Succeed(), func() string {
		return fmt.Sprintf("record %s phase; last: %s %+v", id, last.Phase, last.Conditions)
	})
	return last
}

// waitGone waits until kafka's record id is gone from the API.
func (d *dnsFleet) waitGone(id string, timeout time.Duration) {
	d.t.Helper()
	d.g.Eventually(func() int { code, _ := d.get(d.kafka, "kafka", id); return code }).WithTimeout(timeout).
		WithPolling(100 * time.Millisecond).Should(gomega.Equal(http.StatusNotFound))
}

// answer asks the zone's authoritative server for name's records of type
// t, without recursion: the values, or nil for NXDOMAIN and NODATA.
func answer(g gomega.Gomega, server, name string, t uint16) []string {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), t)
	m.RecursionDesired = false
	in, err := dns.Exchange(m, server)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(in.Authoritative).To(gomega.BeTrue(), "the zone's server answers with authority")
	var out []string
	for _, rr := range in.Answer {
		switch v := rr.(type) {
		case *dns.A:
			if t == dns.TypeA {
				out = append(out, v.A.String())
			}
		case *dns.AAAA:
			if t == dns.TypeAAAA {
				out = append(out, v.AAAA.String())
			}
		case *dns.CNAME:
			if t == dns.TypeCNAME {
				out = append(out, strings.TrimSuffix(v.Target, "."))
			}
		case *dns.MX:
			if t == dns.TypeMX {
				out = append(out, fmt.Sprintf("%d %s", v.Preference, v.Mx))
			}
		case *dns.TXT:
			if t == dns.TypeTXT {
				out = append(out, strings.Join(v.Txt, ""))
			}
		}
	}
	slices.Sort(out)
	return out
}

// expectAnswer waits until the zone's server answers name with want.
func (d *dnsFleet) expectAnswer(name string, t uint16, want ...string) {
	d.t.Helper()
	slices.Sort(want)
	d.g.Eventually(func(g gomega.Gomega) {
		g.Expect(answer(g, d.server, name, t)).To(gomega.Equal(want))
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(gomega.Succeed(), name)
}

// exercise is the whole record life cycle against d's zone, whichever its
// provider: create (idempotent), resolve, move, change type, delete, the
// writers' and the organisations' walls, and a provider outage that is
// retried without a duplicate or a lost delete. down and up make the
// provider fail and come back.
func (d *dnsFleet) exercise(zone string, down, up func()) {
	ctx := context.Background()
	g := d.g

	// Create, and create again: one record.
	a := d.mustCreate(public.DNSRecordCreate{Instance: "orders", Type: ptr(public.DNSRecordA), Targets: &[]string{"198.51.100.10", "198.51.100.11"}})
	g.Expect(a.Name).To(gomega.Equal("orders.kafka." + zone))
	g.Expect(a.Phase).To(gomega.Equal(public.DNSRecordPending))
	code, again, body := d.create(d.kafka, "kafka", public.DNSRecordCreate{Instance: "orders", Type: ptr(public.DNSRecordA),
		Targets: &[]string{"198.51.100.10", "198.51.100.11"}})
	g.Expect(code).To(gomega.Equal(http.StatusOK), body)
	g.Expect(again.Id).To(gomega.Equal(a.Id))
	a = d.waitPhase(a.Id, public.DNSRecordReady, 30*time.Second)
	g.Expect(a.Values).To(gomega.ConsistOf("198.51.100.10", "198.51.100.11"))
	d.expectAnswer(a.Name, dns.TypeA, "198.51.100.10", "198.51.100.11")
	for _, c := range []string{fleet.DNSConditionAccepted, fleet.DNSConditionPublished, fleet.DNSConditionResolvable} {
		i := slices.IndexFunc(a.Conditions, func(x public.Condition) bool { return x.Type == c })
		g.Expect(i).NotTo(gomega.Equal(-1), c)
		g.Expect(string(a.Conditions[i].Status)).To(gomega.Equal("True"), c)
	}

	// Another target for a live instance is a conflict, for any org.
	code, _, body = d.create(d.kafka, "kafka", public.DNSRecordCreate{Instance: "orders", Targets: &[]string{"elsewhere.example.com"}})
	g.Expect(code).To(gomega.Equal(http.StatusConflict), body)

	// Move it, then make it a CNAME: the old set goes with the new one.
	etag := fmt.Sprintf(`"%d"`, a.Generation)
	moved, err := d.fm.Public.UpdateDNSRecordWithResponse(ctx, "kafka", a.Id, &public.UpdateDNSRecordParams{IfMatch: &etag},
		public.DNSRecordPatch{Targets: &[]string{"198.51.100.12"}}, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved.StatusCode()).To(gomega.Equal(http.StatusOK), string(moved.Body))
	d.expectAnswer(a.Name, dns.TypeA, "198.51.100.12")
	d.waitPhase(a.Id, public.DNSRecordReady, 30*time.Second)
	stale, err := d.fm.Public.UpdateDNSRecordWithResponse(ctx, "kafka", a.Id, &public.UpdateDNSRecordParams{IfMatch: &etag},
		public.DNSRecordPatch{Ttl: ptr(120)}, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(stale.StatusCode()).To(gomega.Equal(http.StatusPreconditionFailed), "an If-Match of an older generation")
	cname, err := d.fm.Public.UpdateDNSRecordWithResponse(ctx, "kafka", a.Id, nil,
		public.DNSRecordPatch{Type: ptr(public.DNSRecordCNAME), Targets: &[]string{"router-default.apps.c1.clusters.example.com"}}, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(cname.StatusCode()).To(gomega.Equal(http.StatusOK), string(cname.Body))
	d.expectAnswer(a.Name, dns.TypeCNAME, "router-default.apps.c1.clusters.example.com")
	d.expectAnswer(a.Name, dns.TypeA)
	d.waitPhase(a.Id, public.DNSRecordReady, 30*time.Second)

	// The walls: a non-writer gets 403 code 33, even an org admin; the
	// other service's writer cannot write kafka's subtree, and its own
	// names are made by its own template; another org sees nothing.
	for _, token := range []string{d.nobody, d.redis} {
		code, _, body := d.create(token, "kafka", public.DNSRecordCreate{Instance: "sneaky", Targets: &[]string{"x.example.com"}})
		g.Expect(code).To(gomega.Equal(http.StatusForbidden), body)
		g.Expect(ocmCode([]byte(body))).To(gomega.Equal("FLEET-MGMT-33"), body)
	}
	code, r, body := d.create(d.redis, "redis", public.DNSRecordCreate{Instance: "cache1", Targets: &[]string{"cache.example.com"}})
	g.Expect(code).To(gomega.Equal(http.StatusCreated), body)
	g.Expect(r.Name).To(gomega.Equal("cache1-rw.redis." + zone))
	for _, bad := range []string{"evil.kafka", "x.orders", "ORDERS", "*"} {
		code, _, body := d.create(d.kafka, "kafka", public.DNSRecordCreate{Instance: bad, Targets: &[]string{"x.example.com"}})
		g.Expect(code).To(gomega.Equal(http.StatusBadRequest), body)
		if bad != "*" { // the reason quotes the spec's pattern, which holds one
			g.Expect(body).NotTo(gomega.ContainSubstring(bad), "the error echoes the instance")
		}
	}
	other, _ := d.get(d.nobody, "kafka", a.Id)
	g.Expect(other).To(gomega.Equal(http.StatusNotFound))
	list, err := d.fm.Public.ListDNSRecordsWithResponse(ctx, "kafka", nil, bearer(d.nobody))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.JSON200).NotTo(gomega.BeNil(), string(list.Body))
	g.Expect(list.JSON200.Items).To(gomega.BeEmpty())
	mine, err := d.fm.Public.ListDNSRecordsWithResponse(ctx, "kafka", &public.ListDNSRecordsParams{Search: ptr("phase = 'ready'")}, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(mine.JSON200).NotTo(gomega.BeNil(), string(mine.Body))
	g.Expect(mine.JSON200.Items).To(gomega.HaveLen(1))

	// An outage: a delete and a create wait, nothing is marked published,
	// and both are carried out once the provider is back.
	b := d.mustCreate(public.DNSRecordCreate{Instance: "billing", Type: ptr(public.DNSRecordAAAA), Targets: &[]string{"2001:db8::10"}})
	d.waitPhase(b.Id, public.DNSRecordReady, 30*time.Second)
	down()
	del, err := d.fm.Public.DeleteDNSRecordWithResponse(ctx, "kafka", b.Id, nil, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusAccepted), string(del.Body))
	c := d.mustCreate(public.DNSRecordCreate{Instance: "checkout", Type: ptr(public.DNSRecordA), Targets: &[]string{"198.51.100.20"}})
	g.Eventually(func(g gomega.Gomega) {
		_, rec := d.get(d.kafka, "kafka", c.Id)
		i := slices.IndexFunc(rec.Conditions, func(x public.Condition) bool { return x.Type == fleet.DNSConditionPublished })
		g.Expect(i).NotTo(gomega.Equal(-1))
		g.Expect(rec.Conditions[i].Reason).To(gomega.Equal(fleet.DNSReasonProviderUnavailable))
		g.Expect(rec.Phase).To(gomega.Equal(public.DNSRecordPending))
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	g.Expect(d.waitPhase(b.Id, public.DNSRecordDeleting, time.Second).Values).To(gomega.ConsistOf("2001:db8::10"),
		"the deleted record stays while the provider has not removed it")
	up()
	d.waitPhase(c.Id, public.DNSRecordReady, 60*time.Second)
	d.expectAnswer(c.Name, dns.TypeA, "198.51.100.20")
	d.waitGone(b.Id, 60*time.Second)
	d.expectAnswer(b.Name, dns.TypeAAAA)

	// Delete: the name goes at the provider, then the record.
	del, err = d.fm.Public.DeleteDNSRecordWithResponse(ctx, "kafka", a.Id, nil, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusAccepted), string(del.Body))
	d.waitGone(a.Id, 30*time.Second)
	d.expectAnswer(a.Name, dns.TypeCNAME)
}

// foreignRecords checks, through the binary, that records someone else
// keeps at a record's name (an ACME client's TXT, a person's MX) survive the
// record's life, and that a name holding someone else's A is refused with
// NameOwnedElsewhere and left alone.
func (d *dnsFleet) foreignRecords(b *dnstest.Primary) {
	d.t.Helper()
	g := d.g
	write := func(rrs ...string) {
		m := new(dns.Msg)
		m.SetUpdate(dns.Fqdn(b.Zone))
		for _, r := range rrs {
			rr, err := dns.NewRR(r)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			m.Insert([]dns.RR{rr})
		}
		m.SetTsig(b.KeyName, dns.HmacSHA256, 300, time.Now().Unix())
		resp, _, err := (&dns.Client{Net: "tcp", TsigSecret: map[string]string{b.KeyName: b.Secret}}).Exchange(m, b.Addr)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.Rcode).To(gomega.Equal(dns.RcodeSuccess))
	}
	shared, taken := "cohabited.kafka."+b.Zone, "taken.kafka."+b.Zone
	write(shared+`. 60 IN TXT "acme-challenge-token"`, shared+". 60 IN MX 10 mx.example.net.", taken+". 60 IN A 203.0.113.1")

	r := d.mustCreate(public.DNSRecordCreate{Instance: "cohabited", Type: ptr(public.DNSRecordA), Targets: &[]string{"198.51.100.30"}})
	d.waitPhase(r.Id, public.DNSRecordReady, 30*time.Second)
	d.expectAnswer(shared, dns.TypeA, "198.51.100.30")
	d.expectAnswer(shared, dns.TypeMX, "10 mx.example.net.")
	del, err := d.fm.Public.DeleteDNSRecordWithResponse(context.Background(), "kafka", r.Id, nil, bearer(d.kafka))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusAccepted), string(del.Body))
	d.waitGone(r.Id, 30*time.Second)
	d.expectAnswer(shared, dns.TypeA)
	d.expectAnswer(shared, dns.TypeMX, "10 mx.example.net.")
	d.expectAnswer(shared, dns.TypeTXT, "acme-challenge-token")

	other := d.mustCreate(public.DNSRecordCreate{Instance: "taken", Type: ptr(public.DNSRecordA), Targets: &[]string{"198.51.100.31"}})
	rec := d.waitPhase(other.Id, public.DNSRecordFailed, 30*time.Second)
	i := slices.IndexFunc(rec.Conditions, func(c public.Condition) bool { return c.Type == fleet.DNSConditionPublished })
	g.Expect(i).NotTo(gomega.Equal(-1))
	g.Expect(rec.Conditions[i].Reason).To(gomega.Equal(fleet.DNSReasonNameOwnedElsewhere))
	d.expectAnswer(taken, dns.TypeA, "203.0.113.1")
}

// TestDNSRecordsThroughRFC2136 drives the record life cycle through the
// real binary against a real BIND 9 (Debian's named, started by the test on
// a free loopback port), written by TSIG-signed dynamic updates. The outage
// is named stopped and started again on the same port.
func TestDNSRecordsThroughRFC2136(t *testing.T) {
	t.Parallel()
	bind := dnstest.StartBIND(t, "svc.e2e.example.com")
	d := onboardDNS(t, admin.DNSZoneCreate{Name: bind.Zone, Provider: admin.DNSProviderRFC2136,
		Rfc2136:     &admin.RFC2136Settings{Server: bind.Addr, TsigKeyName: bind.KeyName, TsigAlgorithm: admin.RFC2136SettingsTsigAlgorithm(bind.Algorithm)},
		Credentials: &admin.DNSCredentials{TsigSecret: &bind.Secret}}, bind.Addr)
	d.exercise(bind.Zone, bind.Stop, func() { bind.Start(t) })
	d.foreignRecords(bind)
	// The zone's key, rotated to a wrong one, is refused: the records
	// fail, and nothing in their conditions holds the key.
	wrong := "d3JvbmctZmxlZXQtbWFuYWdlci1rZXktMzItYnl0ZXMh"
	resp, err := d.fm.Admin.UpdateDNSZoneWithResponse(context.Background(), d.zoneID, nil,
		admin.DNSZonePatch{Credentials: &admin.DNSCredentials{TsigSecret: &wrong}}, bearer(d.admin))
	d.g.Expect(err).NotTo(gomega.HaveOccurred())
	d.g.Expect(resp.StatusCode()).To(gomega.Equal(http.StatusOK), string(resp.Body))
	r := d.mustCreate(public.DNSRecordCreate{Instance: "refused", Targets: &[]string{"x.example.com"}})
	rec := d.waitPhase(r.Id, public.DNSRecordFailed, 30*time.Second)
	d.g.Expect(fmt.Sprint(rec.Conditions)).NotTo(gomega.ContainSubstring(wrong))
	d.g.Expect(fmt.Sprint(rec.Conditions)).NotTo(gomega.ContainSubstring(bind.Secret))
}

// TestDNSRecordsThroughRoute53 drives the same life cycle through the real
// binary and the AWS SDK's Route53 client against dnstest's Route53
// server: Route53 cannot be reached from the test machines, and moto, the
// emulator the issue names, is served by PyPI, which this build machine
// cannot reach either. The server implements Route53's documented API
// (SigV4-verified requests, atomic change batches, PENDING then INSYNC
// changes) and answers the zone over DNS. The outage is the API answering
// 503; throttling is answered as Route53 does and retried by the SDK.
func TestDNSRecordsThroughRoute53(t *testing.T) {
	t.Parallel()
	r53 := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "r53.e2e.example.com", PendingPolls: 1})
	d := onboardDNS(t, admin.DNSZoneCreate{Name: r53.Zone, Provider: admin.DNSProviderRoute53,
		Route53:     &admin.Route53Settings{HostedZoneId: r53.HostedZoneID, Region: &r53.Region, Endpoint: &r53.URL},
		Nameservers: &[]string{r53.DNSAddr},
		Credentials: &admin.DNSCredentials{AccessKeyId: &r53.AccessKeyID, SecretAccessKey: &r53.SecretAccessKey}}, r53.DNSAddr)
	r53.Throttle(2)
	d.exercise(r53.Zone, func() { r53.SetDown(true) }, func() { r53.SetDown(false) })
	// No duplicate and nothing lost: besides its apex, the zone holds
	// checkout's record and redis's, each with its ownership record,
	// nothing else.
	var names []string
	for _, s := range r53.Sets() {
		names = append(names, s.Name+" "+string(s.Type))
	}
	d.g.Expect(names).To(gomega.ConsistOf("checkout.kafka."+r53.Zone+" A", fleet.DNSOwnerLabel+".checkout.kafka."+r53.Zone+" TXT",
		"cache1-rw.redis."+r53.Zone+" CNAME", fleet.DNSOwnerLabel+".cache1-rw.redis."+r53.Zone+" TXT"))
	d.g.Expect(r53.Requests("GetChange")).To(gomega.BeNumerically(">", 0), "dns_mgr waits for INSYNC")
}

// TestDNSRecordFollowsAPoolCluster: through the fleet-manager and agent
// binaries, with provisiontest playing Hive on the test hub, a record that
// names a capacity pool's cluster resolves on a real BIND 9 as a CNAME to
// the cluster's ingress router, made from the console URL the hub reports;
// a cluster of another organisation's pool is not found.
func TestDNSRecordFollowsAPoolCluster(t *testing.T) {
	s := newStackArgs(t, "hub-e2e-dns-pool", append([]string{"--pool-resync-interval=300ms",
		"--pool-base-domain=pools.dns.example.com"}, dnsFlags...)...)
	provisiontest.Play(t, hubtest.Dynamic(t), provisiontest.DefaultOptions())
	ctx := context.Background()
	user := bearer(s.user)
	bp, err := s.fm.Public.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "web", Spec: public.BlueprintSpec{Release: "4.16.3",
		ControlPlaneSize: public.SizeMedium, MachinePools: []public.MachinePool{{Name: "workers", Size: public.SizeLarge, Replicas: ptr(2)}}}}, user)
	if err != nil || bp.JSON201 == nil {
		t.Fatalf("CreateBlueprint = %d %s, %v", bp.StatusCode(), bp.Body, err)
	}
	created, err := s.fm.Public.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: "web-eu", BlueprintId: bp.JSON201.Id,
		BlueprintVersion: 1, Cloud: public.CloudAWS, Region: "eu-west-1", Zone: ptr("eu"), MinClusters: 1, MaxClusters: 1, UnitsPerCluster: 10,
		Credentials: public.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "AKIAE2E", "aws_secret_access_key": "e2e-secret"},
			PullSecret: `{"auths":{}}`}}, user)
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateCapacityPool = %d %s, %v", created.StatusCode(), created.Body, err)
	}
	var cluster public.PoolCluster
	s.g.Eventually(func(g gomega.Gomega) {
		cs := s.poolClusters(created.JSON201.Id)
		g.Expect(cs).To(gomega.HaveLen(1))
		cluster = cs[0]
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(gomega.Succeed())

	bind := dnstest.StartBIND(t, "pool.e2e.example.com")
	d := &dnsFleet{t: t, g: s.g, fm: s.fm, admin: s.admin, kafka: s.user, server: bind.Addr,
		nobody: s.fm.token("org-nobody", "eve")}
	zone, err := s.fm.Admin.CreateDNSZoneWithResponse(ctx, admin.DNSZoneCreate{Name: bind.Zone, Provider: admin.DNSProviderRFC2136,
		Rfc2136:     &admin.RFC2136Settings{Server: bind.Addr, TsigKeyName: bind.KeyName, TsigAlgorithm: admin.RFC2136SettingsTsigAlgorithm(bind.Algorithm)},
		Credentials: &admin.DNSCredentials{TsigSecret: &bind.Secret}}, bearer(s.admin))
	if err != nil || zone.JSON201 == nil {
		t.Fatalf("CreateDNSZone = %d %s, %v", zone.StatusCode(), zone.Body, err)
	}
	svc, err := s.fm.Admin.CreateDNSServiceWithResponse(ctx, admin.DNSServiceCreate{Name: "kafka", ZoneId: zone.JSON201.Id,
		WriterOrganizations: &[]string{"org-hub-e2e-dns-pool", "org-nobody"}}, bearer(s.admin))
	if err != nil || svc.JSON201 == nil {
		t.Fatalf("CreateDNSService = %d %s, %v", svc.StatusCode(), svc.Body, err)
	}
	code, _, body := d.create(d.nobody, "kafka", public.DNSRecordCreate{Instance: "stolen", ClusterId: &cluster.Id})
	s.g.Expect(code).To(gomega.Equal(http.StatusNotFound), "another organisation's pool cluster: %s", body)

	r := d.mustCreate(public.DNSRecordCreate{Instance: "shop", ClusterId: &cluster.Id})
	rec := d.waitPhase(r.Id, public.DNSRecordReady, 90*time.Second)
	name := fleet.ManagedClusterName(fleet.Registration{ID: cluster.Id, Name: cluster.Name})
	router := "router-default.apps." + name + ".pools.dns.example.com"
	s.g.Expect(rec.Values).To(gomega.Equal([]string{router}))
	d.expectAnswer(rec.Name, dns.TypeCNAME, router)
}
