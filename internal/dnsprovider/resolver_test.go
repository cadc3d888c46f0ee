package dnsprovider_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/dnsprovider"
	"github.com/fleetmanager/fleet-manager/internal/dnstest"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestResolverAnswers asks real primaries (BIND 9, Knot): an answer, NODATA (the name holds
// another type), NXDOMAIN, a CNAME asked as A (no A), and a name of a zone
// the server does not serve (an error: it does not answer for it).
func TestResolverAnswers(t *testing.T) {
	t.Parallel()
	forEachPrimary(t, func(t *testing.T, b *dnstest.Primary) {
		g := gomega.NewWithT(t)
		_, err := apply(t, dnsprovider.NewRFC2136(testConfig), primaryZone(b),
			fleet.DNSChange{Upsert: set("a.svc.example.test", fleet.DNSRecordA, 60, "192.0.2.1")},
			fleet.DNSChange{Upsert: set("c.svc.example.test", fleet.DNSRecordCNAME, 60, "a.svc.example.test")})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		r := dnsprovider.NewResolver(testConfig)
		ctx := context.Background()
		for _, tc := range []struct {
			name   string
			typ    fleet.DNSRecordType
			values []string
			found  bool
			err    string
		}{
			{"A.SVC.example.test.", fleet.DNSRecordA, []string{"192.0.2.1"}, true, ""},
			{"a.svc.example.test", fleet.DNSRecordAAAA, nil, false, ""},
			{"svc.example.test", fleet.DNSRecordA, nil, false, ""},
			{"nothing.svc.example.test", fleet.DNSRecordCNAME, nil, false, ""},
			{"c.svc.example.test", fleet.DNSRecordCNAME, []string{"a.svc.example.test"}, true, ""},
			{"c.svc.example.test", fleet.DNSRecordA, nil, false, ""},
			{"a.elsewhere.test", fleet.DNSRecordA, nil, false, "REFUSED"},
		} {
			values, found, err := r.Lookup(ctx, b.Addr, tc.name, tc.typ)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Lookup(%s %s) = %v, %t, %v; want an error with %q", tc.name, tc.typ, values, found, err, tc.err)
				}
				continue
			}
			if err != nil || found != tc.found || strings.Join(values, ",") != strings.Join(tc.values, ",") {
				t.Errorf("Lookup(%s %s) = %v, %t, %v; want %v, %t", tc.name, tc.typ, values, found, err, tc.values, tc.found)
			}
		}
	})
}

// TestResolverRetriesTruncatedOverTCP: an answer truncated over UDP is asked
// again over TCP, and only the asked type at the exact name is returned.
func TestResolverRetriesTruncatedOverTCP(t *testing.T) {
	t.Parallel()
	var tcpQueries atomic.Int32
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			m.Truncated = true
		} else {
			tcpQueries.Add(1)
			for _, rr := range []string{"x.example.test. 60 IN A 192.0.2.1", "x.example.test. 60 IN A 192.0.2.2",
				"other.example.test. 60 IN A 192.0.2.3", "x.example.test. 60 IN TXT \"not an address\""} {
				parsed, _ := dns.NewRR(rr)
				m.Answer = append(m.Answer, parsed)
			}
		}
		_ = w.WriteMsg(m)
	})
	addr := serveTestDNS(t, handler)
	values, found, err := dnsprovider.NewResolver(testConfig).Lookup(context.Background(), addr, "x.example.test", fleet.DNSRecordA)
	if err != nil || !found || strings.Join(values, ",") != "192.0.2.1,192.0.2.2" || tcpQueries.Load() != 1 {
		t.Errorf("Lookup(truncated) = %v, %t, %v after %d TCP queries; want both addresses of the name over TCP once",
			values, found, err, tcpQueries.Load())
	}
}

// TestResolverTimesOut: a server that never answers is an error, within
// the configured timeout, not "no records".
func TestResolverTimesOut(t *testing.T) {
	t.Parallel()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	timeout := 200 * time.Millisecond
	began := time.Now()
	_, found, err := dnsprovider.NewResolver(dnsprovider.Config{DNSTimeout: timeout}).Lookup(context.Background(),
		silent.LocalAddr().String(), "x.example.test", fleet.DNSRecordA)
	if err == nil || found {
		t.Errorf("Lookup(silent server) = %t, %v; want an error", found, err)
	}
	if elapsed := time.Since(began); elapsed > 10*timeout {
		t.Errorf("Lookup(silent server) took %s, want about the timeout %s", elapsed, timeout)
	}
}

// serveTestDNS serves handler over UDP and TCP on one loopback port until
// the test ends.
func serveTestDNS(t *testing.T, handler dns.Handler) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		if err != nil {
			l.Close()
			continue
		}
		for _, srv := range []*dns.Server{{Listener: l, Handler: handler}, {PacketConn: pc, Handler: handler}} {
			go func() { _ = srv.ActivateAndServe() }()
			t.Cleanup(func() { _ = srv.Shutdown() })
		}
		return l.Addr().String()
	}
}
