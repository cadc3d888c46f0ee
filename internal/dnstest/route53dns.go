package dnstest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// serveDNS answers the hosted zone's INSYNC records, authoritatively, on a
// loopback port over UDP and TCP until the test ends; it returns the
// address.
func (s *Route53Server) serveDNS(t testing.TB) string {
	t.Helper()
	var pc net.PacketConn
	var l net.Listener
	for attempt := 0; pc == nil; attempt++ {
		ports, err := childproc.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		if l, err = net.Listen("tcp", addr); err == nil {
			if pc, err = net.ListenPacket("udp", addr); err != nil {
				l.Close()
			}
		}
		if err != nil && attempt == portAttempts*10 {
			t.Fatalf("dnstest: no loopback port for DNS: %v", err)
		}
	}
	handler := dns.HandlerFunc(s.answer)
	udp, tcp := &dns.Server{PacketConn: pc, Handler: handler}, &dns.Server{Listener: l, Handler: handler}
	for _, srv := range []*dns.Server{udp, tcp} {
		go func() { _ = srv.ActivateAndServe() }()
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return l.Addr().String()
}

// answer answers a question as Route53's servers do: the set of the type
// asked, or the name's CNAME; NODATA when the name holds other types or
// names below it, NXDOMAIN otherwise, both with the SOA; REFUSED outside
// the zone.
func (s *Route53Server) answer(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	if len(r.Question) != 1 || !within(fqdn(r.Question[0].Name), s.apex) {
		m.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(m)
		return
	}
	m.Authoritative = true
	q := r.Question[0]
	name, typ := fqdn(q.Name), dns.TypeToString[q.Qtype]
	zone := s.served()
	set, ok := zone[setKey{name, typ}]
	if !ok && typ != "CNAME" {
		set, ok = zone[setKey{name, "CNAME"}]
	}
	if ok {
		m.Answer = rrs(set)
	} else {
		exists := false
		for k := range zone {
			if k.name == name || strings.HasSuffix(k.name, "."+name) {
				exists = true
			}
		}
		if !exists {
			m.Rcode = dns.RcodeNameError
		}
		m.Ns = rrs(zone[setKey{s.apex, "SOA"}])
	}
	_ = w.WriteMsg(m)
}

// rrs returns a set's resource records.
func rrs(set rrset) []dns.RR {
	var out []dns.RR
	for _, v := range set.Values {
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", set.Name, set.TTL, set.Type, v))
		if err == nil {
			out = append(out, rr)
		}
	}
	return out
}
