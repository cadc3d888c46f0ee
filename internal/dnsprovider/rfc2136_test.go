package dnsprovider_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
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

// testTimeout bounds one call of a provider in the tests.
const testTimeout = 30 * time.Second

var testConfig = dnsprovider.Config{DNSTimeout: 2 * time.Second, Route53MaxAttempts: 3, Route53MaxBackoff: 20 * time.Millisecond}

func primaryZone(b *dnstest.Primary) fleet.DNSZoneAccess {
	return fleet.DNSZoneAccess{
		Zone: fleet.DNSZone{ID: "zone-bind", Name: b.Zone, Provider: fleet.DNSProviderRFC2136,
			RFC2136: &fleet.RFC2136Settings{Server: b.Addr, TSIGKeyName: b.KeyName, TSIGAlgorithm: b.Algorithm}},
		Credentials: fleet.DNSCredentials{TSIGSecret: b.Secret},
	}
}

func set(name string, t fleet.DNSRecordType, ttl int, values ...string) *fleet.DNSRecordSet {
	return &fleet.DNSRecordSet{Name: name, Type: t, TTL: ttl, Values: values}
}

// lookup asks server for name's records of type t and fails the test when
// the server does not answer.
func lookup(t *testing.T, server, name string, typ fleet.DNSRecordType) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	values, found, err := dnsprovider.NewResolver(testConfig).Lookup(ctx, server, name, typ)
	if err != nil {
		t.Fatalf("Lookup(%s %s) = %v", name, typ, err)
	}
	if found != (len(values) > 0) {
		t.Fatalf("Lookup(%s %s) = %v, %t: found must say whether values are there", name, typ, values, found)
	}
	slices.Sort(values)
	return values
}

// apply sends changes; a change without a record id gets one made from
// its name (the ownership record names it).
func apply(t *testing.T, p fleet.DNSProvider, zone fleet.DNSZoneAccess, changes ...fleet.DNSChange) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	changes = slices.Clone(changes)
	for i, c := range changes {
		if s := cmp.Or(c.Upsert, c.Previous); c.RecordID == "" && s != nil {
			changes[i].RecordID = "rec-" + strings.ReplaceAll(s.Name, ".", "-")
		}
	}
	return p.Apply(ctx, zone, changes)
}

// TestRFC2136ApplyUpsertsReplacesAndDeletes: batches of upserts, a type
// change, a replaced value and a delete reach real primaries (BIND 9,
// Knot) and their answers.
func TestRFC2136ApplyUpsertsReplacesAndDeletes(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		g := gomega.NewWithT(t)
		zone, p := primaryZone(b), dnsprovider.NewRFC2136(testConfig)
		a, c, v6, gone := "a.svc.example.test", "c.svc.example.test", "v6.svc.example.test", "gone.svc.example.test"

		id, err := apply(t, p, zone,
			fleet.DNSChange{RecordID: "1", Upsert: set(a, fleet.DNSRecordA, 60, "192.0.2.2", "192.0.2.1")},
			fleet.DNSChange{RecordID: "2", Upsert: set(c, fleet.DNSRecordCNAME, 60, "Ingress.Apps.Example.NET")},
			fleet.DNSChange{RecordID: "3", Upsert: set(v6, fleet.DNSRecordAAAA, 60, "2001:db8::1")},
			fleet.DNSChange{RecordID: "4", Upsert: set(gone, fleet.DNSRecordA, 60, "192.0.2.9")})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(id).To(gomega.BeEmpty(), "an accepted update is in place: no change id")
		g.Expect(lookup(t, b.Addr, a, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.1", "192.0.2.2"}))
		g.Expect(lookup(t, b.Addr, c, fleet.DNSRecordCNAME)).To(gomega.Equal([]string{"ingress.apps.example.net"}))
		g.Expect(lookup(t, b.Addr, v6, fleet.DNSRecordAAAA)).To(gomega.Equal([]string{"2001:db8::1"}))

		// A type change, new values, a delete, and an upsert whose Previous is
		// wrong (nil): the name ends up holding exactly the upsert.
		_, err = apply(t, p, zone,
			fleet.DNSChange{RecordID: "1", Upsert: set(a, fleet.DNSRecordCNAME, 60, "lb.example.net"), Previous: set(a, fleet.DNSRecordA, 60, "192.0.2.1", "192.0.2.2")},
			fleet.DNSChange{RecordID: "2", Upsert: set(c, fleet.DNSRecordAAAA, 60, "2001:db8::2")},
			fleet.DNSChange{RecordID: "3", Upsert: set(v6, fleet.DNSRecordAAAA, 120, "2001:db8::3", "2001:db8::4"), Previous: set(v6, fleet.DNSRecordAAAA, 60, "2001:db8::1")},
			fleet.DNSChange{RecordID: "4", Previous: set(gone, fleet.DNSRecordA, 60, "192.0.2.9")})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, a, fleet.DNSRecordCNAME)).To(gomega.Equal([]string{"lb.example.net"}))
		g.Expect(lookup(t, b.Addr, a, fleet.DNSRecordA)).To(gomega.BeEmpty(), "the A set went with the type change")
		g.Expect(lookup(t, b.Addr, c, fleet.DNSRecordAAAA)).To(gomega.Equal([]string{"2001:db8::2"}))
		g.Expect(lookup(t, b.Addr, c, fleet.DNSRecordCNAME)).To(gomega.BeEmpty(), "the CNAME went though Previous did not name it")
		g.Expect(lookup(t, b.Addr, v6, fleet.DNSRecordAAAA)).To(gomega.Equal([]string{"2001:db8::3", "2001:db8::4"}))
		g.Expect(lookup(t, b.Addr, gone, fleet.DNSRecordA)).To(gomega.BeEmpty())

		synced, err := p.Synced(context.Background(), zone, "")
		g.Expect(synced, err).To(gomega.BeTrue())
		g.Expect(p.Nameservers(context.Background(), zone)).To(gomega.Equal([]string{b.Addr}))
	})
}

// TestRFC2136RefusesABadKey: an update signed with a wrong secret or an
// unknown key is refused (NOTAUTH with the TSIG error), the refusal holds
// neither secret, and nothing is written.
func TestRFC2136RefusesABadKey(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		p := dnsprovider.NewRFC2136(testConfig)
		wrong := make([]byte, 32)
		if _, err := rand.Read(wrong); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, key, secret, want string }{
			{"wrong secret", b.KeyName, base64.StdEncoding.EncodeToString(wrong), "NOTAUTH (TSIG BADSIG)"},
			{"unknown key", "someone-else.", b.Secret, "NOTAUTH (TSIG BADKEY)"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				zone := primaryZone(b)
				zone.Zone.RFC2136.TSIGKeyName, zone.Credentials.TSIGSecret = tc.key, tc.secret
				name := "x.svc.example.test"
				_, err := apply(t, p, zone, fleet.DNSChange{Upsert: set(name, fleet.DNSRecordA, 60, "192.0.2.7")})
				refusal, ok := errors.AsType[*fleet.DNSRefusal](err)
				if !ok || !strings.Contains(refusal.Reason, tc.want) {
					t.Fatalf("Apply(%s) = %v, want a refusal %q", tc.name, err, tc.want)
				}
				if strings.Contains(err.Error(), tc.secret) || strings.Contains(err.Error(), b.Secret) {
					t.Errorf("Apply(%s) = %q: the error holds a secret", tc.name, err)
				}
				if got := lookup(t, b.Addr, name, fleet.DNSRecordA); len(got) > 0 {
					t.Errorf("after a refused update %s A = %v, want nothing", name, got)
				}
			})
		}
	})
}

// TestRFC2136RefusesABatchAtomically: one change outside the zone has the
// server refuse the whole update (NOTZONE); the batch's other change is not
// made.
func TestRFC2136RefusesABatchAtomically(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		zone, p := primaryZone(b), dnsprovider.NewRFC2136(testConfig)
		inside := "in.svc.example.test"
		_, err := apply(t, p, zone,
			fleet.DNSChange{Upsert: set(inside, fleet.DNSRecordA, 60, "192.0.2.8")},
			fleet.DNSChange{Upsert: set("out.other.test", fleet.DNSRecordA, 60, "192.0.2.8")})
		if refusal, ok := errors.AsType[*fleet.DNSRefusal](err); !ok || !strings.Contains(refusal.Reason, "NOTZONE") {
			t.Fatalf("Apply(a change outside the zone) = %v, want a NOTZONE refusal", err)
		}
		if got := lookup(t, b.Addr, inside, fleet.DNSRecordA); len(got) > 0 {
			t.Errorf("after a refused batch %s A = %v, want nothing: the update is atomic", inside, got)
		}
	})
}

// TestRFC2136OutageIsTransient: while the server is down Apply fails with
// an error that is no refusal; once it is back (its journal kept the
// earlier update) the same batch goes through.
func TestRFC2136OutageIsTransient(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		g := gomega.NewWithT(t)
		zone, p := primaryZone(b), dnsprovider.NewRFC2136(testConfig)
		before, after := "before.svc.example.test", "after.svc.example.test"
		_, err := apply(t, p, zone, fleet.DNSChange{Upsert: set(before, fleet.DNSRecordA, 60, "192.0.2.10")})
		g.Expect(err).NotTo(gomega.HaveOccurred())

		b.Stop()
		change := fleet.DNSChange{Upsert: set(after, fleet.DNSRecordA, 60, "192.0.2.11")}
		_, err = apply(t, p, zone, change)
		g.Expect(err).To(gomega.HaveOccurred())
		_, refused := errors.AsType[*fleet.DNSRefusal](err)
		g.Expect(refused).To(gomega.BeFalse(), "an outage is transient, not a refusal: %v", err)

		b.Start(t)
		_, err = apply(t, p, zone, change)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(lookup(t, b.Addr, after, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.11"}))
		g.Expect(lookup(t, b.Addr, before, fleet.DNSRecordA)).To(gomega.Equal([]string{"192.0.2.10"}))
	})
}

// TestRFC2136AnswersOfOtherServers: a server that answers SERVFAIL is
// transient, REFUSED a refusal, and a NOERROR without TSIG is not taken for
// an accepted update.
func TestRFC2136AnswersOfOtherServers(t *testing.T) {
	t.Parallel()
	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	other := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	for _, tc := range []struct {
		name    string
		rcode   int
		signer  string // the secret the server signs its answer with, if any
		refusal bool
		want    string
	}{
		{"SERVFAIL", dns.RcodeServerFailure, "", false, "SERVFAIL"},
		{"REFUSED", dns.RcodeRefused, "", true, "REFUSED"},
		{"unsigned NOERROR", dns.RcodeSuccess, "", false, "without TSIG"},
		{"NOERROR signed with another secret", dns.RcodeSuccess, other, false, "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// The library's default refuses UPDATE (NOTIMP): accept it.
			accept := func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }
			srv := &dns.Server{Listener: l, MsgAcceptFunc: accept, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
				m := new(dns.Msg)
				m.SetRcode(r, tc.rcode)
				if tc.signer != "" {
					m.SetTsig("k.", dns.HmacSHA512, 300, time.Now().Unix())
				}
				_ = w.WriteMsg(m)
			})}
			if tc.signer != "" {
				srv.TsigSecret = map[string]string{"k.": tc.signer}
			}
			go func() { _ = srv.ActivateAndServe() }()
			t.Cleanup(func() { _ = srv.Shutdown() })
			zone := fleet.DNSZoneAccess{
				Zone: fleet.DNSZone{Name: "example.test", Provider: fleet.DNSProviderRFC2136, RFC2136: &fleet.RFC2136Settings{
					Server: l.Addr().String(), TSIGKeyName: "k.", TSIGAlgorithm: fleet.TSIGHMACSHA512}},
				Credentials: fleet.DNSCredentials{TSIGSecret: secret},
			}
			_, err = apply(t, dnsprovider.NewRFC2136(testConfig), zone, fleet.DNSChange{Upsert: set("a.example.test", fleet.DNSRecordA, 60, "192.0.2.1")})
			_, refused := errors.AsType[*fleet.DNSRefusal](err)
			if err == nil || refused != tc.refusal || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Apply(server answers %s) = %v, want an error with %q, refusal %t", tc.name, err, tc.want, tc.refusal)
			}
		})
	}
}

// primaries are the RFC 2136 implementations the provider is tested
// against.
var primaries = []struct {
	name  string
	start func(testing.TB, string) *dnstest.Primary
}{{"BIND", dnstest.StartBIND}, {"Knot", dnstest.StartKnot}}

// forEachPrimary runs test against each implementation, in parallel.
func forEachPrimary(t *testing.T, test func(t *testing.T, b *dnstest.Primary)) {
	for _, p := range primaries {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			test(t, p.start(t, "example.test"))
		})
	}
}
