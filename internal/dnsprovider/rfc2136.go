package dnsprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// tsigFudge is the clock skew the server accepts for a signature (RFC 8945
// recommends five minutes).
const tsigFudge = 300

// RFC2136 writes zones by RFC 2136 dynamic updates over TCP, signed with the
// zone's TSIG key. An update is atomic: the server applies all of it or
// nothing, so one Apply is one UPDATE message.
type RFC2136 struct {
	timeout time.Duration
}

// NewRFC2136 returns the RFC 2136 provider.
func NewRFC2136(cfg Config) *RFC2136 { return &RFC2136{timeout: cfg.defaulted().DNSTimeout} }

var tsigAlgorithms = map[string]string{
	fleet.TSIGHMACSHA256: dns.HmacSHA256,
	fleet.TSIGHMACSHA384: dns.HmacSHA384,
	fleet.TSIGHMACSHA512: dns.HmacSHA512,
}

// Apply sends changes as one signed UPDATE. The fleet manager owns each
// record's name, so an upsert deletes every RRset at the name and adds the
// new records, and a delete deletes every RRset at the name: the update
// holds no prerequisite and does not depend on Previous. The change id is
// always "": an accepted update is in place on the primary.
func (p *RFC2136) Apply(ctx context.Context, zone fleet.DNSZoneAccess, changes []fleet.DNSChange) (string, error) {
	s := zone.Zone.RFC2136
	if s == nil {
		return "", &fleet.DNSRefusal{Reason: "the zone has no rfc2136 settings"}
	}
	alg, ok := tsigAlgorithms[s.TSIGAlgorithm]
	if !ok {
		return "", &fleet.DNSRefusal{Reason: "the zone's TSIG algorithm is not supported"}
	}
	m, err := updateMessage(zone.Zone.Name, changes)
	if err != nil {
		return "", err
	}
	if len(m.Ns) == 0 {
		return "", nil
	}
	key := dns.CanonicalName(s.TSIGKeyName)
	m.SetTsig(key, alg, tsigFudge, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: p.timeout, TsigSecret: map[string]string{key: zone.Credentials.TSIGSecret}}
	resp, _, err := c.ExchangeContext(ctx, m, s.Server)
	secret := zone.Credentials.TSIGSecret
	switch {
	case resp != nil && resp.Rcode == dns.RcodeServerFailure:
		return "", fmt.Errorf("RFC2136.Apply(%s): %s answered SERVFAIL", zone.Zone.Name, s.Server)
	case resp != nil && resp.Rcode != dns.RcodeSuccess:
		return "", &fleet.DNSRefusal{Reason: rcodeReason(resp)}
	case err != nil && resp != nil && (errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrTime) || errors.Is(err, dns.ErrSecret)):
		return "", fmt.Errorf("RFC2136.Apply(%s): the answer's TSIG does not verify: %s", zone.Zone.Name, redact(err.Error(), secret))
	case err != nil:
		return "", fmt.Errorf("RFC2136.Apply(%s): %s", zone.Zone.Name, redact(err.Error(), secret))
	case resp.IsTsig() == nil:
		return "", fmt.Errorf("RFC2136.Apply(%s): %s answered without TSIG", zone.Zone.Name, s.Server)
	}
	return "", nil
}

// updateMessage builds the UPDATE of changes to zone.
func updateMessage(zone string, changes []fleet.DNSChange) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	removed := map[string]bool{}
	remove := func(name string) {
		fq := dns.CanonicalName(name)
		if !removed[fq] {
			removed[fq] = true
			m.RemoveName([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: fq}}})
		}
	}
	for _, c := range changes {
		if c.Previous != nil {
			remove(c.Previous.Name)
		}
		if c.Upsert == nil {
			continue
		}
		remove(c.Upsert.Name)
		rrs, err := recordsOf(*c.Upsert)
		if err != nil {
			return nil, err
		}
		m.Insert(rrs)
	}
	return m, nil
}

// recordsOf returns a set's resource records.
func recordsOf(s fleet.DNSRecordSet) ([]dns.RR, error) {
	rrs := make([]dns.RR, 0, len(s.Values))
	for _, v := range s.Values {
		hdr := dns.RR_Header{Name: dns.CanonicalName(s.Name), Class: dns.ClassINET, Ttl: uint32(s.TTL)}
		switch s.Type {
		case fleet.DNSRecordCNAME:
			hdr.Rrtype = dns.TypeCNAME
			rrs = append(rrs, &dns.CNAME{Hdr: hdr, Target: dns.CanonicalName(v)})
		case fleet.DNSRecordA, fleet.DNSRecordAAAA:
			ip := net.ParseIP(v)
			if ip == nil {
				return nil, &fleet.DNSRefusal{Reason: "a value of " + string(s.Type) + " is not an address"}
			}
			if s.Type == fleet.DNSRecordA {
				hdr.Rrtype = dns.TypeA
				rrs = append(rrs, &dns.A{Hdr: hdr, A: ip.To4()})
			} else {
				hdr.Rrtype = dns.TypeAAAA
				rrs = append(rrs, &dns.AAAA{Hdr: hdr, AAAA: ip})
			}
		default:
			return nil, &fleet.DNSRefusal{Reason: "record type " + string(s.Type) + " is not supported"}
		}
	}
	return rrs, nil
}

// rcodeReason names a refused update's rcode and, for a TSIG failure, the
// TSIG error (BADSIG, BADKEY, BADTIME).
func rcodeReason(resp *dns.Msg) string {
	reason := dns.RcodeToString[resp.Rcode]
	if reason == "" {
		reason = fmt.Sprintf("rcode %d", resp.Rcode)
	}
	if t := resp.IsTsig(); t != nil && t.Error != dns.RcodeSuccess {
		reason += " (TSIG " + dns.RcodeToString[int(t.Error)] + ")"
	}
	return "the server answered " + reason
}

// Synced reports true: an accepted update is in place on the primary.
func (p *RFC2136) Synced(context.Context, fleet.DNSZoneAccess, string) (bool, error) {
	return true, nil
}

// Nameservers returns the server the updates go to.
func (p *RFC2136) Nameservers(_ context.Context, zone fleet.DNSZoneAccess) ([]string, error) {
	if zone.Zone.RFC2136 == nil {
		return nil, &fleet.DNSRefusal{Reason: "the zone has no rfc2136 settings"}
	}
	return []string{zone.Zone.RFC2136.Server}, nil
}
