package dnsprovider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// ednsSize is the UDP payload the resolver advertises: the DNS flag day
// 2020's size, which no path fragments.
const ednsSize = 1232

// Resolver asks authoritative servers without recursion: UDP first, TCP
// when the answer is truncated.
type Resolver struct {
	timeout time.Duration
}

// NewResolver returns the resolver.
func NewResolver(cfg Config) *Resolver { return &Resolver{timeout: cfg.defaulted().DNSTimeout} }

var queryTypes = map[fleet.DNSRecordType]uint16{
	fleet.DNSRecordCNAME: dns.TypeCNAME,
	fleet.DNSRecordA:     dns.TypeA,
	fleet.DNSRecordAAAA:  dns.TypeAAAA,
}

// Lookup asks server for name's records of type t. It returns only records
// of that type at that exact name (a CNAME in the answer to an A question
// is no A), and false for NXDOMAIN and NODATA. An answer that is not
// authoritative, or an rcode other than NOERROR and NXDOMAIN, is an error:
// the server does not serve the zone.
func (r *Resolver) Lookup(ctx context.Context, server, name string, t fleet.DNSRecordType) ([]string, bool, error) {
	qtype, ok := queryTypes[t]
	if !ok {
		return nil, false, fmt.Errorf("Lookup(%s): record type %s is not supported", name, t)
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.CanonicalName(name), qtype)
	q.RecursionDesired = false
	q.SetEdns0(ednsSize, false)
	resp, _, err := (&dns.Client{Net: "udp", Timeout: r.timeout}).ExchangeContext(ctx, q, server)
	if err == nil && resp.Truncated {
		resp, _, err = (&dns.Client{Net: "tcp", Timeout: r.timeout}).ExchangeContext(ctx, q, server)
	}
	if err != nil {
		return nil, false, fmt.Errorf("Lookup(%s %s @%s): %w", name, t, server, err)
	}
	switch {
	case resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError:
		return nil, false, fmt.Errorf("Lookup(%s %s @%s): the server answered %s", name, t, server, dns.RcodeToString[resp.Rcode])
	case !resp.Authoritative:
		return nil, false, fmt.Errorf("Lookup(%s %s @%s): the answer is not authoritative", name, t, server)
	case resp.Rcode == dns.RcodeNameError:
		return nil, false, nil
	}
	var values []string
	for _, rr := range resp.Answer {
		h := rr.Header()
		if h.Rrtype != qtype || !strings.EqualFold(h.Name, q.Question[0].Name) {
			continue
		}
		switch v := rr.(type) {
		case *dns.CNAME:
			values = append(values, fleet.NormalizeDNSName(v.Target))
		case *dns.A:
			values = append(values, v.A.String())
		case *dns.AAAA:
			values = append(values, v.AAAA.String())
		}
	}
	return values, len(values) > 0, nil
}
