package dnsprovider_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/dnsprovider"
	"github.com/fleetmanager/fleet-manager/internal/dnstest"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// foreign are the records someone else keeps at a name the fleet manager
// writes: an ACME client's TXT, a person's MX, another tool's AAAA.
var foreign = []string{`TXT "acme-challenge-token"`, "MX 10 mx.example.net.", "AAAA 2001:db8::99"}

// putForeign writes foreign's records at name on b, as someone outside the
// fleet manager would, with the zone's key.
func putForeign(t *testing.T, b *dnstest.Primary, name string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(b.Zone))
	for _, r := range foreign {
		rr, err := dns.NewRR(dns.Fqdn(name) + " 60 IN " + r)
		if err != nil {
			t.Fatal(err)
		}
		m.Insert([]dns.RR{rr})
	}
	m.SetTsig(b.KeyName, dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: testTimeout, TsigSecret: map[string]string{b.KeyName: b.Secret}}
	resp, _, err := c.Exchange(m, b.Addr)
	if err != nil || resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("writing foreign records at %s: %v, %v", name, err, resp)
	}
}

// rawLookup returns what server answers for name's records of qtype, each
// as "TYPE rdata".
func rawLookup(t *testing.T, server, name string, qtype uint16) []string {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	resp, _, err := (&dns.Client{Net: "tcp", Timeout: testTimeout}).Exchange(q, server)
	if err != nil {
		t.Fatalf("asking %s %s: %v", name, dns.TypeToString[qtype], err)
	}
	var out []string
	for _, rr := range resp.Answer {
		if rr.Header().Rrtype == qtype {
			out = append(out, dns.TypeToString[qtype]+" "+strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
	}
	slices.Sort(out)
	return out
}

// foreignAt returns the foreign records name holds.
func foreignAt(t *testing.T, server, name string) []string {
	t.Helper()
	var out []string
	for _, qtype := range []uint16{dns.TypeTXT, dns.TypeMX, dns.TypeAAAA} {
		out = append(out, rawLookup(t, server, name, qtype)...)
	}
	return out
}

// ownerOf returns the text of name's ownership record on server.
func ownerOf(t *testing.T, server, name string) []string {
	t.Helper()
	return rawLookup(t, server, fleet.DNSOwnerLabel+"."+name, dns.TypeTXT)
}

func owned(owner, record string, typ fleet.DNSRecordType) []string {
	return []string{`TXT "heritage=fleet-manager,fleet-manager/owner=` + owner + `,fleet-manager/record=` + record + `,fleet-manager/type=` + string(typ) + `"`}
}

func providerOf(owner string) *dnsprovider.RFC2136 {
	cfg := testConfig
	cfg.OwnerID = owner
	return dnsprovider.NewRFC2136(cfg)
}

// conflicts returns the record ids a refusal says are owned elsewhere.
func conflicts(err error) []string {
	refusal, ok := errors.AsType[*fleet.DNSRefusal](err)
	if !ok {
		return nil
	}
	var ids []string
	for id := range refusal.Conflicts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestRFC2136LeavesForeignRecordsAlone: a TXT, an MX and an AAAA someone
// else keeps at a record's name, on real primaries (BIND 9, Knot), survive
// the record's create, update, a refused change to a CNAME (which cannot
// live beside them) and delete; the ownership record follows the record.
func TestRFC2136LeavesForeignRecordsAlone(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		g := gomega.NewWithT(t)
		zone, p := primaryZone(b), providerOf("alpha")
		name := "shared.svc.example.test"
		putForeign(t, b, name)
		want := foreignAt(t, b.Addr, name)
		g.Expect(want).To(gomega.HaveLen(3))

		v1 := set(name, fleet.DNSRecordA, 60, "192.0.2.1")
		_, err := apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Upsert: v1})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.1"}))
		g.Expect(ownerOf(t, b.Addr, name)).To(gomega.Equal(owned("alpha", "r1", fleet.DNSRecordA)))
		g.Expect(foreignAt(t, b.Addr, name)).To(gomega.Equal(want), "create")

		v2 := set(name, fleet.DNSRecordA, 120, "192.0.2.2", "192.0.2.3")
		_, err = apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Upsert: v2, Previous: v1})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.2", "192.0.2.3"}))
		g.Expect(foreignAt(t, b.Addr, name)).To(gomega.Equal(want), "update")

		// The server ignores a CNAME beside the foreign records: the change
		// is refused and the name put back as it was.
		_, err = apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Upsert: set(name, fleet.DNSRecordCNAME, 60, "lb.example.net"), Previous: v2})
		g.Expect(conflicts(err)).To(gomega.Equal([]string{"r1"}), "%v", err)
		g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.2", "192.0.2.3"}))
		g.Expect(ownerOf(t, b.Addr, name)).To(gomega.Equal(owned("alpha", "r1", fleet.DNSRecordA)))
		g.Expect(foreignAt(t, b.Addr, name)).To(gomega.Equal(want), "refused CNAME")

		_, err = apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Previous: v2})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.BeEmpty())
		g.Expect(ownerOf(t, b.Addr, name)).To(gomega.BeEmpty())
		g.Expect(foreignAt(t, b.Addr, name)).To(gomega.Equal(want), "delete")
	})
}

// TestRFC2136RefusesANameOwnedElsewhere: on real primaries (BIND 9, Knot),
// a name whose ownership record names another deployment, or another
// record, or that holds a set in the way without one, is refused with
// Conflicts and nothing of the batch is written; the batch's other change
// goes through once sent without it; two deployments sending their
// changes to one name in turn never change each other's records.
func TestRFC2136RefusesANameOwnedElsewhere(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		g := gomega.NewWithT(t)
		zone, alpha, beta := primaryZone(b), providerOf("alpha"), providerOf("beta")
		name, other, taken, txt := "contested.svc.example.test", "other.svc.example.test", "taken.svc.example.test", "txt.svc.example.test"
		mine := set(name, fleet.DNSRecordA, 60, "192.0.2.1")
		_, err := apply(t, alpha, zone, fleet.DNSChange{RecordID: "r1", Upsert: mine})
		g.Expect(err).NotTo(gomega.HaveOccurred())

		for range 3 {
			_, err = apply(t, beta, zone, fleet.DNSChange{RecordID: "r2", Upsert: set(name, fleet.DNSRecordA, 60, "198.51.100.1")},
				fleet.DNSChange{RecordID: "r3", Upsert: set(other, fleet.DNSRecordA, 60, "198.51.100.2")})
			g.Expect(conflicts(err)).To(gomega.Equal([]string{"r2"}), "%v", err)
			g.Expect(lookup(t, b.Addr, other, fleet.DNSRecordA)).To(gomega.BeEmpty(), "nothing of a refused batch is written")
			// beta removing what it believes it published leaves alpha's.
			_, err = apply(t, beta, zone, fleet.DNSChange{RecordID: "r2", Previous: mine})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.1"}))
			g.Expect(ownerOf(t, b.Addr, name)).To(gomega.Equal(owned("alpha", "r1", fleet.DNSRecordA)))
		}
		_, err = apply(t, beta, zone, fleet.DNSChange{RecordID: "r3", Upsert: set(other, fleet.DNSRecordA, 60, "198.51.100.2")})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, other, fleet.DNSRecordA)).To(gomega.Equal([]string{"198.51.100.2"}))

		// The same owner id, another record: not ours either.
		_, err = apply(t, alpha, zone, fleet.DNSChange{RecordID: "r9", Upsert: set(name, fleet.DNSRecordA, 60, "192.0.2.9")})
		g.Expect(conflicts(err)).To(gomega.Equal([]string{"r9"}), "%v", err)

		// Sets in the way without an ownership record: an A, and, for a
		// CNAME, a TXT.
		putForeign(t, b, txt)
		m := new(dns.Msg)
		m.SetUpdate(dns.Fqdn(b.Zone))
		rr, _ := dns.NewRR(taken + ". 60 IN A 203.0.113.1")
		m.Insert([]dns.RR{rr})
		m.SetTsig(b.KeyName, dns.HmacSHA256, 300, time.Now().Unix())
		if resp, _, err := (&dns.Client{Net: "tcp", TsigSecret: map[string]string{b.KeyName: b.Secret}}).Exchange(m, b.Addr); err != nil || resp.Rcode != dns.RcodeSuccess {
			t.Fatalf("writing %s: %v %v", taken, err, resp)
		}
		_, err = apply(t, alpha, zone, fleet.DNSChange{RecordID: "r4", Upsert: set(taken, fleet.DNSRecordA, 60, "192.0.2.4")},
			fleet.DNSChange{RecordID: "r5", Upsert: set(txt, fleet.DNSRecordCNAME, 60, "lb.example.net")})
		g.Expect(conflicts(err)).To(gomega.Equal([]string{"r4", "r5"}), "%v", err)
		g.Expect(lookup(t, b.Addr, taken, fleet.DNSRecordA)).To(gomega.Equal([]string{"203.0.113.1"}))
		g.Expect(ownerOf(t, b.Addr, taken)).To(gomega.BeEmpty())

		// alpha's own record still changes.
		_, err = apply(t, alpha, zone, fleet.DNSChange{RecordID: "r1", Upsert: set(name, fleet.DNSRecordA, 60, "192.0.2.5"), Previous: mine})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.5"}))
	})
}

// TestRFC2136HealsACrashBeforeTheRowIsWritten: on real primaries (BIND 9,
// Knot), a pass whose update went through but whose row was not written
// (the replica crashed) sends the same change again, with the row's stale
// Previous; the next pass takes the name as its own, by its ownership
// record, and ends with exactly the upsert, the foreign records untouched.
func TestRFC2136HealsACrashBeforeTheRowIsWritten(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		g := gomega.NewWithT(t)
		zone, p := primaryZone(b), providerOf("alpha")
		name := "crash.svc.example.test"
		putForeign(t, b, name)
		want := foreignAt(t, b.Addr, name)
		v1, v2 := set(name, fleet.DNSRecordA, 60, "192.0.2.1"), set(name, fleet.DNSRecordA, 60, "192.0.2.2")
		for _, step := range []struct {
			what   string
			change fleet.DNSChange
			a      []string
		}{
			{"create", fleet.DNSChange{RecordID: "r1", Upsert: v1}, []string{"192.0.2.1"}},
			{"update", fleet.DNSChange{RecordID: "r1", Upsert: v2, Previous: v1}, []string{"192.0.2.2"}},
			{"delete", fleet.DNSChange{RecordID: "r1", Previous: v2}, nil},
		} {
			for pass := range 2 {
				_, err := apply(t, p, zone, step.change)
				g.Expect(err).NotTo(gomega.HaveOccurred(), "%s, pass %d", step.what, pass+1)
				g.Expect(lookup(t, b.Addr, name, fleet.DNSRecordA)).To(gomega.Equal(step.a), "%s, pass %d", step.what, pass+1)
				g.Expect(foreignAt(t, b.Addr, name)).To(gomega.Equal(want), "%s, pass %d", step.what, pass+1)
				if step.a != nil {
					g.Expect(ownerOf(t, b.Addr, name)).To(gomega.Equal(owned("alpha", "r1", fleet.DNSRecordA)))
				} else {
					g.Expect(ownerOf(t, b.Addr, name)).To(gomega.BeEmpty())
				}
			}
		}
	})
}

// route53Foreign are foreign's records as Route53 holds them.
func route53Foreign(name string) []fleet.DNSRecordSet {
	return []fleet.DNSRecordSet{*set(name, "TXT", 60, `"acme-challenge-token"`), *set(name, "MX", 60, "10 mx.example.net."),
		*set(name, fleet.DNSRecordAAAA, 60, "2001:db8::99")}
}

// route53Of returns the Route53 provider of owner.
func route53Of(owner string) *dnsprovider.Route53 {
	cfg := testConfig
	cfg.OwnerID = owner
	return dnsprovider.NewRoute53(cfg)
}

// TestRoute53LeavesForeignRecordsAlone (against the Route53 contract
// server, as Route53 and moto are unreachable here): a TXT, an MX and an
// AAAA someone else keeps at a record's name survive its create, update,
// a refused change to a CNAME and delete; each batch carries exactly the
// record's sets and its ownership record's, an update DELETEs their exact
// old values (Route53's own prerequisite).
func TestRoute53LeavesForeignRecordsAlone(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	zone, p := route53Zone(s), route53Of("alpha")
	name := "shared.svc.example.test"
	owner := fleet.DNSOwnerLabel + "." + name
	s.Add(route53Foreign(name)...)
	foreignSets := func() []fleet.DNSRecordSet {
		var out []fleet.DNSRecordSet
		for _, set := range records(s) {
			if set.Type != fleet.DNSRecordA {
				out = append(out, set)
			}
		}
		return out
	}
	text := ownerText("alpha", "r1", fleet.DNSRecordA)

	v1 := set(name, fleet.DNSRecordA, 60, "192.0.2.1")
	_, err := apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Upsert: v1})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.LastBatch()).To(gomega.Equal([]string{"CREATE " + name + " A 60 192.0.2.1", "CREATE " + owner + " TXT 300 " + text}))
	g.Expect(foreignSets()).To(gomega.ConsistOf(route53Foreign(name)), "create")

	v2 := set(name, fleet.DNSRecordA, 120, "192.0.2.2")
	_, err = apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Upsert: v2, Previous: v1})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.LastBatch()).To(gomega.Equal([]string{"DELETE " + owner + " TXT 300 " + text, "DELETE " + name + " A 60 192.0.2.1",
		"CREATE " + name + " A 120 192.0.2.2", "CREATE " + owner + " TXT 300 " + text}))
	g.Expect(foreignSets()).To(gomega.ConsistOf(route53Foreign(name)), "update")

	changes := s.Changes()
	_, err = apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Upsert: set(name, fleet.DNSRecordCNAME, 60, "lb.example.net"), Previous: v2})
	g.Expect(conflicts(err)).To(gomega.Equal([]string{"r1"}), "%v", err)
	g.Expect(s.Changes()).To(gomega.Equal(changes), "a CNAME cannot live beside the foreign sets: nothing is written")

	_, err = apply(t, p, zone, fleet.DNSChange{RecordID: "r1", Previous: v2})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.LastBatch()).To(gomega.Equal([]string{"DELETE " + owner + " TXT 300 " + text, "DELETE " + name + " A 120 192.0.2.2"}))
	g.Expect(records(s)).To(gomega.ConsistOf(route53Foreign(name)), "delete")
	g.Expect(owners(s)).To(gomega.BeEmpty())
}

// TestRoute53RefusesANameOwnedElsewhere (against the Route53 contract
// server, as Route53 and moto are unreachable here): a name whose ownership
// record names another deployment or record, or that holds a set in the
// way without one, is refused with Conflicts and nothing of the request is
// written; a delete of a name that is not ours writes nothing; a set this
// deployment wrote before ownership records existed, still as it wrote it,
// is taken over.
func TestRoute53RefusesANameOwnedElsewhere(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	zone, alpha, beta := route53Zone(s), route53Of("alpha"), route53Of("beta")
	name, other, taken, legacy := "contested.svc.example.test", "other.svc.example.test", "taken.svc.example.test", "legacy.svc.example.test"
	mine := set(name, fleet.DNSRecordA, 60, "192.0.2.1")
	_, err := apply(t, alpha, zone, fleet.DNSChange{RecordID: "r1", Upsert: mine})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	s.Add(*set(taken, fleet.DNSRecordA, 60, "203.0.113.1"), *set(legacy, fleet.DNSRecordA, 60, "192.0.2.7"))
	before := s.Sets()

	for range 3 {
		_, err = apply(t, beta, zone, fleet.DNSChange{RecordID: "r2", Upsert: set(name, fleet.DNSRecordA, 60, "198.51.100.1")},
			fleet.DNSChange{RecordID: "r3", Upsert: set(other, fleet.DNSRecordA, 60, "198.51.100.2")})
		g.Expect(conflicts(err)).To(gomega.Equal([]string{"r2"}), "%v", err)
		_, err = apply(t, beta, zone, fleet.DNSChange{RecordID: "r2", Previous: mine})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = apply(t, alpha, zone, fleet.DNSChange{RecordID: "r9", Upsert: set(name, fleet.DNSRecordA, 60, "192.0.2.9")},
			fleet.DNSChange{RecordID: "r4", Upsert: set(taken, fleet.DNSRecordA, 60, "192.0.2.4")})
		g.Expect(conflicts(err)).To(gomega.Equal([]string{"r4", "r9"}), "%v", err)
		g.Expect(s.Sets()).To(gomega.Equal(before))
	}
	_, err = apply(t, beta, zone, fleet.DNSChange{RecordID: "r3", Upsert: set(other, fleet.DNSRecordA, 60, "198.51.100.2")},
		fleet.DNSChange{RecordID: "r7", Upsert: set(legacy, fleet.DNSRecordA, 60, "192.0.2.8"), Previous: set(legacy, fleet.DNSRecordA, 60, "192.0.2.7")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(owners(s)).To(gomega.Equal(map[string]string{name: ownerText("alpha", "r1", fleet.DNSRecordA),
		other: ownerText("beta", "r3", fleet.DNSRecordA), legacy: ownerText("beta", "r7", fleet.DNSRecordA)}))
	g.Expect(records(s)).To(gomega.ConsistOf(*mine, *set(other, fleet.DNSRecordA, 60, "198.51.100.2"),
		*set(taken, fleet.DNSRecordA, 60, "203.0.113.1"), *set(legacy, fleet.DNSRecordA, 60, "192.0.2.8")))
}
