package dnsprovider_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/dnsprovider"
	"github.com/fleetmanager/fleet-manager/internal/dnstest"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// The Route53 tests run against dnstest.Route53Server, a server of the
// Route53 API's contract as AWS documents it: Route53 itself cannot be
// reached from here, and moto, the emulator issue 21 names, cannot be
// installed (PyPI is refused on this machine).

func route53Zone(s *dnstest.Route53Server) fleet.DNSZoneAccess {
	return fleet.DNSZoneAccess{
		Zone: fleet.DNSZone{ID: "zone-r53", Name: s.Zone, Provider: fleet.DNSProviderRoute53,
			Route53: &fleet.Route53Settings{HostedZoneID: s.HostedZoneID, Endpoint: s.URL}},
		Credentials: fleet.DNSCredentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey},
	}
}

// records returns the zone's sets but the ownership records.
func records(s *dnstest.Route53Server) []fleet.DNSRecordSet {
	var out []fleet.DNSRecordSet
	for _, set := range s.Sets() {
		if !strings.HasPrefix(set.Name, fleet.DNSOwnerLabel+".") {
			out = append(out, set)
		}
	}
	return out
}

// owners returns the zone's ownership records: the text of each, by the
// name it is beside.
func owners(s *dnstest.Route53Server) map[string]string {
	out := map[string]string{}
	for _, set := range s.Sets() {
		if name, ok := strings.CutPrefix(set.Name, fleet.DNSOwnerLabel+"."); ok && set.Type == "TXT" {
			out[name] = strings.Join(set.Values, " ")
		}
	}
	return out
}

// ownerText is the ownership record's text owner writes for record's set
// of type t, as Route53 holds it (quoted).
func ownerText(owner, record string, t fleet.DNSRecordType) string {
	return `"heritage=fleet-manager,fleet-manager/owner=` + owner + `,fleet-manager/record=` + record + `,fleet-manager/type=` + string(t) + `"`
}

func synced(t *testing.T, p fleet.DNSProvider, zone fleet.DNSZoneAccess, id string) bool {
	t.Helper()
	ok, err := p.Synced(context.Background(), zone, id)
	if err != nil {
		t.Fatalf("Synced(%s) = %v", id, err)
	}
	return ok
}

// TestRoute53ApplyBatches (against the Route53 contract server, as Route53
// and moto are unreachable here): a batch of three types, then a type
// change, new values and a delete; each change id is PENDING, then INSYNC,
// and only then do the zone's servers answer it.
func TestRoute53ApplyBatches(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test", PendingPolls: 1})
	zone, p := route53Zone(s), dnsprovider.NewRoute53(testConfig)
	a, c, v6 := "a.svc.example.test", "c.svc.example.test", "v6.svc.example.test"

	id, err := apply(t, p, zone,
		fleet.DNSChange{Upsert: set(a, fleet.DNSRecordA, 60, "192.0.2.1", "192.0.2.2")},
		fleet.DNSChange{Upsert: set(c, fleet.DNSRecordCNAME, 60, "ingress.apps.example.net")},
		fleet.DNSChange{Upsert: set(v6, fleet.DNSRecordAAAA, 60, "2001:db8::1")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(id).NotTo(gomega.BeEmpty())
	g.Expect(lookup(t, s.DNSAddr, a, fleet.DNSRecordA)).To(gomega.BeEmpty(), "a PENDING change is not served yet")
	g.Expect(synced(t, p, zone, id)).To(gomega.BeFalse(), "GetChange answers PENDING first")
	g.Expect(synced(t, p, zone, id)).To(gomega.BeTrue(), "then INSYNC")
	g.Expect(lookup(t, s.DNSAddr, a, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.1", "192.0.2.2"}))
	g.Expect(lookup(t, s.DNSAddr, c, fleet.DNSRecordCNAME)).To(gomega.Equal([]string{"ingress.apps.example.net"}))
	g.Expect(lookup(t, s.DNSAddr, v6, fleet.DNSRecordAAAA)).To(gomega.Equal([]string{"2001:db8::1"}))

	id, err = apply(t, p, zone,
		fleet.DNSChange{Upsert: set(a, fleet.DNSRecordCNAME, 60, "lb.example.net"), Previous: set(a, fleet.DNSRecordA, 60, "192.0.2.1", "192.0.2.2")},
		fleet.DNSChange{Previous: set(c, fleet.DNSRecordCNAME, 60, "ingress.apps.example.net")},
		fleet.DNSChange{Upsert: set(v6, fleet.DNSRecordAAAA, 120, "2001:db8::2"), Previous: set(v6, fleet.DNSRecordAAAA, 60, "2001:db8::1")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(synced(t, p, zone, id)).To(gomega.BeFalse())
	g.Expect(synced(t, p, zone, id)).To(gomega.BeTrue())
	g.Expect(records(s)).To(gomega.ConsistOf(*set(a, fleet.DNSRecordCNAME, 60, "lb.example.net."), *set(v6, fleet.DNSRecordAAAA, 120, "2001:db8::2")))
	g.Expect(owners(s)).To(gomega.Equal(map[string]string{a: ownerText(dnsprovider.DefaultOwnerID, "rec-a-svc-example-test", fleet.DNSRecordCNAME),
		v6: ownerText(dnsprovider.DefaultOwnerID, "rec-v6-svc-example-test", fleet.DNSRecordAAAA)}), "the ownership records follow, c's went with it")
	g.Expect(lookup(t, s.DNSAddr, a, fleet.DNSRecordCNAME)).To(gomega.Equal([]string{"lb.example.net"}))
	g.Expect(lookup(t, s.DNSAddr, a, fleet.DNSRecordA)).To(gomega.BeEmpty())
	g.Expect(lookup(t, s.DNSAddr, c, fleet.DNSRecordCNAME)).To(gomega.BeEmpty())
	g.Expect(s.Changes()).To(gomega.Equal(2), "one ChangeResourceRecordSets per batch")
	g.Expect(p.Nameservers(context.Background(), zone)).To(gomega.Equal([]string{
		"ns-1.awsdns-00.com:53", "ns-513.awsdns-00.net:53", "ns-1025.awsdns-00.org:53", "ns-1537.awsdns-00.co.uk:53"}))
}

// TestRoute53HealsDrift (against the Route53 contract server, as Route53 and
// moto are unreachable here): when the zone no longer holds what Previous
// says (someone changed or removed a set the ownership record says is
// ours, or a pass wrote its change and crashed before recording it),
// Route53 refuses the batch; the provider reads the names' sets and sends
// it once more, so each name ends up holding exactly the upsert.
func TestRoute53HealsDrift(t *testing.T) {
	t.Parallel()
	changed, removed, crashed, kept := "changed.svc.example.test", "removed.svc.example.test", "crashed.svc.example.test", "kept.svc.example.test"
	first := func(name string) fleet.DNSChange {
		return fleet.DNSChange{Upsert: set(name, fleet.DNSRecordA, 60, "192.0.2.1")}
	}
	for _, tc := range []struct {
		name   string
		drift  func(s *dnstest.Route53Server)
		change fleet.DNSChange
		want   []fleet.DNSRecordSet
	}{
		{"values changed by someone, type change", func(s *dnstest.Route53Server) {
			s.Add(*set(changed, fleet.DNSRecordA, 300, "198.51.100.1"))
		}, fleet.DNSChange{Upsert: set(changed, fleet.DNSRecordCNAME, 60, "lb.example.net"), Previous: first(changed).Upsert},
			[]fleet.DNSRecordSet{*set(changed, fleet.DNSRecordCNAME, 60, "lb.example.net.")}},
		{"set removed by someone, delete", func(s *dnstest.Route53Server) {
			s.Put(removed)
		}, fleet.DNSChange{Previous: first(removed).Upsert}, nil},
		{"written, then the pass crashed before recording it", func(*dnstest.Route53Server) {},
			fleet.DNSChange{Upsert: set(crashed, fleet.DNSRecordA, 120, "192.0.2.3")},
			[]fleet.DNSRecordSet{*set(crashed, fleet.DNSRecordA, 120, "192.0.2.3")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
			zone, p := route53Zone(s), dnsprovider.NewRoute53(testConfig)
			_, err := apply(t, p, zone, first(changeName(tc.change)))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			tc.drift(s)
			before := s.Requests("ChangeResourceRecordSets")
			// A change of the batch that did not drift rides along.
			_, err = apply(t, p, zone, tc.change, fleet.DNSChange{Upsert: set(kept, fleet.DNSRecordA, 60, "192.0.2.4")})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(records(s)).To(gomega.ConsistOf(append(tc.want, *set(kept, fleet.DNSRecordA, 60, "192.0.2.4"))))
			g.Expect(owners(s)).To(gomega.HaveLen(len(tc.want)+1), "one ownership record a name")
			g.Expect(s.Requests("ChangeResourceRecordSets")-before).To(gomega.Equal(2), "refused once, sent once more")
			g.Expect(s.Requests("ListResourceRecordSets")).To(gomega.Equal(2), "only the drifted name and its ownership record are read")
		})
	}
}

func changeName(c fleet.DNSChange) string { return cmp.Or(c.Upsert, c.Previous).Name }

// TestRoute53Refusals (against the Route53 contract server, as Route53 and
// moto are unreachable here): a batch Route53 refuses for its content is
// refused whole and not retried; bad credentials are refused without
// showing them.
func TestRoute53Refusals(t *testing.T) {
	t.Parallel()
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	inside := set("in.svc.example.test", fleet.DNSRecordA, 60, "192.0.2.5")
	for _, tc := range []struct {
		name    string
		zone    func(z *fleet.DNSZoneAccess)
		changes []fleet.DNSChange
		want    string
	}{
		{"a name outside the zone", func(*fleet.DNSZoneAccess) {},
			[]fleet.DNSChange{{Upsert: inside}, {Upsert: set("out.other.test", fleet.DNSRecordA, 60, "192.0.2.5")}},
			"InvalidChangeBatch: RRSet with DNS name out.other.test. is not permitted in zone example.test."},
		{"a wrong secret", func(z *fleet.DNSZoneAccess) { z.Credentials.SecretAccessKey = "wrong-" + s.SecretAccessKey },
			[]fleet.DNSChange{{Upsert: inside}}, "SignatureDoesNotMatch"},
		{"an unknown access key", func(z *fleet.DNSZoneAccess) { z.Credentials.AccessKeyID = "AKIAUNKNOWN0000000000" },
			[]fleet.DNSChange{{Upsert: inside}}, "InvalidClientTokenId"},
		{"an unknown hosted zone", func(z *fleet.DNSZoneAccess) { z.Zone.Route53.HostedZoneID = "ZNOSUCHZONE" },
			[]fleet.DNSChange{{Upsert: inside}}, "NoSuchHostedZone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zone := route53Zone(s)
			settings := *zone.Zone.Route53
			zone.Zone.Route53 = &settings
			tc.zone(&zone)
			before := s.Requests("ChangeResourceRecordSets")
			_, err := apply(t, dnsprovider.NewRoute53(testConfig), zone, tc.changes...)
			refusal, ok := errors.AsType[*fleet.DNSRefusal](err)
			if !ok || !strings.Contains(refusal.Reason, tc.want) {
				t.Fatalf("Apply(%s) = %v, want a refusal with %q", tc.name, err, tc.want)
			}
			for _, secret := range []string{zone.Credentials.AccessKeyID, zone.Credentials.SecretAccessKey} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Apply(%s) = %q: the error holds a credential", tc.name, err)
				}
			}
			if n := s.Requests("ChangeResourceRecordSets") - before; n != 1 {
				t.Errorf("Apply(%s) sent %d requests, want 1: a refusal is not retried", tc.name, n)
			}
			if len(s.Sets()) != 0 {
				t.Errorf("after Apply(%s) the zone holds %v, want nothing", tc.name, s.Sets())
			}
		})
	}
}

// TestRoute53ThrottlingAndOutage (against the Route53 contract server, as
// Route53 and moto are unreachable here): throttled requests are retried by
// the SDK until one goes through; an outage (503) fails after the
// configured attempts with an error that is no refusal, and the same batch
// goes through once the service is back.
func TestRoute53ThrottlingAndOutage(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	zone, p := route53Zone(s), dnsprovider.NewRoute53(testConfig)

	s.Throttle(testConfig.Route53MaxAttempts - 1)
	_, err := apply(t, p, zone, fleet.DNSChange{Upsert: set("t.svc.example.test", fleet.DNSRecordA, 60, "192.0.2.6")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.Requests("ChangeResourceRecordSets")).To(gomega.Equal(testConfig.Route53MaxAttempts))
	g.Expect(s.Changes()).To(gomega.Equal(1))

	s.SetDown(true)
	change := fleet.DNSChange{Upsert: set("o.svc.example.test", fleet.DNSRecordA, 60, "192.0.2.7")}
	_, err = apply(t, p, zone, change)
	g.Expect(err).To(gomega.HaveOccurred())
	_, refused := errors.AsType[*fleet.DNSRefusal](err)
	g.Expect(refused).To(gomega.BeFalse(), "an outage is transient: %v", err)
	g.Expect(s.Requests("ChangeResourceRecordSets")).To(gomega.Equal(2*testConfig.Route53MaxAttempts), "each attempt was made")
	_, err = p.Synced(context.Background(), zone, "CNOSUCHCHANGE")
	g.Expect(err).To(gomega.HaveOccurred())

	s.SetDown(false)
	_, err = apply(t, p, zone, change)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.Changes()).To(gomega.Equal(2), "the outage made no change")
}

// TestRoute53ChunksALargeBatch (against the Route53 contract server, as
// Route53 and moto are unreachable here, which enforces Route53's documented
// limits of a request and refuses a request over them): a batch of more
// records, with their ownership records, than one request may hold is sent
// in chunks.
func TestRoute53ChunksALargeBatch(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	zone, p := route53Zone(s), dnsprovider.NewRoute53(testConfig)
	const count = 1200
	var creates, upserts []fleet.DNSChange
	for i := range count {
		name := fmt.Sprintf("i%d.svc.example.test", i)
		first := set(name, fleet.DNSRecordA, 60, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
		creates = append(creates, fleet.DNSChange{Upsert: first})
		upserts = append(upserts, fleet.DNSChange{Upsert: set(name, fleet.DNSRecordA, 120, first.Values[0]), Previous: first})
	}
	id, err := apply(t, p, zone, creates...)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	created := len(strings.Fields(id))
	g.Expect(created).To(gomega.BeNumerically(">", 1), "the batch does not fit a request")
	g.Expect(s.Changes()).To(gomega.Equal(created))
	id, err = apply(t, p, zone, upserts...)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(len(strings.Fields(id))).To(gomega.BeNumerically(">", created), "a change DELETEs and CREATEs: more requests")
	g.Expect(s.Changes()).To(gomega.Equal(created + len(strings.Fields(id))))
	g.Expect(synced(t, p, zone, id)).To(gomega.BeTrue())
	g.Expect(records(s)).To(gomega.HaveLen(count))
	g.Expect(owners(s)).To(gomega.HaveLen(count))
	g.Expect(records(s)).To(gomega.HaveEach(gomega.HaveField("TTL", 120)))
	g.Expect(lookup(t, s.DNSAddr, "i1199.svc.example.test", fleet.DNSRecordA)).To(gomega.Equal([]string{"10.0.4.200"}))
}

// TestRoute53DefaultCredentials (against the Route53 contract server, as
// Route53 and moto are unreachable here): a zone without an access key
// signs with the deployment's credentials, as the SDK's default chain finds
// them (here the environment).
func TestRoute53DefaultCredentials(t *testing.T) {
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretAccessKey)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	zone := route53Zone(s)
	zone.Credentials = fleet.DNSCredentials{}
	if _, err := apply(t, dnsprovider.NewRoute53(testConfig), zone, fleet.DNSChange{Upsert: set("d.svc.example.test", fleet.DNSRecordA, 60, "192.0.2.9")}); err != nil {
		t.Fatalf("Apply(no access key, the environment's) = %v", err)
	}
	if got := records(s); len(got) != 1 || got[0].Name != "d.svc.example.test" {
		t.Errorf("after Apply the zone holds %v, want d.svc.example.test", got)
	}
}
