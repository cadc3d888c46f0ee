package dnsprovider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// tsigFudge is the clock skew the server accepts for a signature (RFC 8945
// recommends five minutes).
const tsigFudge = 300

// RFC2136 writes zones by RFC 2136 dynamic updates over TCP, signed with the
// zone's TSIG key. An update is atomic: the server applies all of it or
// nothing, so one Apply is one UPDATE message (two when the names are not
// as the fleet manager last wrote them).
type RFC2136 struct {
	timeout time.Duration
	owner   string
}

// NewRFC2136 returns the RFC 2136 provider.
func NewRFC2136(cfg Config) *RFC2136 {
	cfg = cfg.defaulted()
	return &RFC2136{timeout: cfg.DNSTimeout, owner: cfg.OwnerID}
}

var tsigAlgorithms = map[string]string{
	fleet.TSIGHMACSHA256: dns.HmacSHA256,
	fleet.TSIGHMACSHA384: dns.HmacSHA384,
	fleet.TSIGHMACSHA512: dns.HmacSHA512,
}

// Apply sends changes as one signed UPDATE, atomic on the server. Each
// change removes only what the name's ownership record says is this
// deployment's (ownership.go), exactly, and adds the new set with its
// ownership record; its prerequisites say that the name holds what the
// change assumes (what was last written, by Previous), so that nothing
// else at the name is touched. When a prerequisite fails (a pass that
// crashed before recording its change, a hand edit, a name someone else
// holds), Apply reads the names and sends the update once more, planned
// from what they hold; changes whose names are not this deployment's are
// refused with Conflicts, and nothing is written. The change id is always
// "": an accepted update is in place on the primary.
func (p *RFC2136) Apply(ctx context.Context, zone fleet.DNSZoneAccess, changes []fleet.DNSChange) (string, error) {
	s := zone.Zone.RFC2136
	if s == nil {
		return "", &fleet.DNSRefusal{Reason: "the zone has no rfc2136 settings"}
	}
	if _, ok := tsigAlgorithms[s.TSIGAlgorithm]; !ok {
		return "", &fleet.DNSRefusal{Reason: "the zone's TSIG algorithm is not supported"}
	}
	plans := make([]plan, 0, len(changes))
	for _, c := range changes {
		if r := validChange(c); r != nil {
			return "", r
		}
		if c.Upsert == nil && c.Previous == nil {
			continue
		}
		pl, _ := decide(p.owner, c, written(p.owner, c.RecordID, c.Previous))
		plans = append(plans, pl)
	}
	err := p.update(ctx, zone, plans)
	if !prerequisiteFailed(err) {
		if err != nil {
			return "", err
		}
		return "", p.checkCNAMEs(ctx, zone, plans)
	}
	states, err := p.readAll(ctx, zone, changes)
	if err != nil {
		return "", err
	}
	conflicts := map[string]string{}
	plans = plans[:0]
	for i, c := range changes {
		if c.Upsert == nil && c.Previous == nil {
			continue
		}
		pl, conflict := decide(p.owner, c, states[i])
		if conflict != "" {
			conflicts[c.RecordID] = conflict
			continue
		}
		plans = append(plans, pl)
	}
	if len(conflicts) > 0 {
		return "", &fleet.DNSRefusal{Reason: "names hold records this deployment does not own", Conflicts: conflicts}
	}
	switch err := p.update(ctx, zone, plans); {
	case prerequisiteFailed(err):
		return "", fmt.Errorf("RFC2136.Apply(%s): the names changed while they were read", zone.Zone.Name)
	case err != nil:
		return "", err
	}
	return "", p.checkCNAMEs(ctx, zone, plans)
}

// update sends plans as one signed UPDATE; nothing when they change
// nothing.
func (p *RFC2136) update(ctx context.Context, zone fleet.DNSZoneAccess, plans []plan) error {
	m, err := updateMessage(zone.Zone.Name, plans)
	if err != nil || len(m.Ns) == 0 {
		return err
	}
	return p.send(ctx, zone, m)
}

// send signs and sends an UPDATE and checks its answer.
func (p *RFC2136) send(ctx context.Context, zone fleet.DNSZoneAccess, m *dns.Msg) error {
	s := zone.Zone.RFC2136
	key := dns.CanonicalName(s.TSIGKeyName)
	m.SetTsig(key, tsigAlgorithms[s.TSIGAlgorithm], tsigFudge, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: p.timeout, TsigSecret: map[string]string{key: zone.Credentials.TSIGSecret}}
	resp, _, err := c.ExchangeContext(ctx, m, s.Server)
	secret := zone.Credentials.TSIGSecret
	switch {
	case resp != nil && resp.Rcode == dns.RcodeServerFailure:
		return fmt.Errorf("RFC2136.Apply(%s): %s answered SERVFAIL", zone.Zone.Name, s.Server)
	case resp != nil && prerequisiteRcodes[resp.Rcode] && resp.IsTsig() != nil && err == nil:
		return &prerequisiteError{rcode: resp.Rcode}
	case resp != nil && resp.Rcode != dns.RcodeSuccess:
		return &fleet.DNSRefusal{Reason: rcodeReason(resp)}
	case err != nil && resp != nil && (errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrTime) || errors.Is(err, dns.ErrSecret)):
		return fmt.Errorf("RFC2136.Apply(%s): the answer's TSIG does not verify: %s", zone.Zone.Name, redact(err.Error(), secret))
	case err != nil:
		return fmt.Errorf("RFC2136.Apply(%s): %s", zone.Zone.Name, redact(err.Error(), secret))
	case resp.IsTsig() == nil:
		return fmt.Errorf("RFC2136.Apply(%s): %s answered without TSIG", zone.Zone.Name, s.Server)
	}
	return nil
}

// prerequisiteRcodes are the answers of an update whose prerequisites do
// not hold (RFC 2136 section 3.2).
var prerequisiteRcodes = map[int]bool{dns.RcodeYXDomain: true, dns.RcodeYXRrset: true, dns.RcodeNXRrset: true, dns.RcodeNameError: true}

// prerequisiteError is a signed answer that a prerequisite does not hold:
// the names do not hold what the update assumed.
type prerequisiteError struct{ rcode int }

func (e *prerequisiteError) Error() string {
	return "a prerequisite of the update does not hold (" + dns.RcodeToString[e.rcode] + ")"
}

func prerequisiteFailed(err error) bool {
	_, ok := errors.AsType[*prerequisiteError](err)
	return ok
}

// checkCNAMEs checks, after an accepted update, that each change from
// another type to a CNAME took: a server ignores a CNAME added beside other
// data (RFC 2136 section 3.4.2.2), which no prerequisite excludes. Where it
// did not, the name is put back as it was and the change is refused.
func (p *RFC2136) checkCNAMEs(ctx context.Context, zone fleet.DNSZoneAccess, plans []plan) error {
	conflicts := map[string]string{}
	for _, pl := range plans {
		if !pl.toCNAME {
			continue
		}
		name := changeName(pl.change)
		rrs, err := p.query(ctx, zone, name, dns.TypeCNAME)
		if err != nil {
			return err
		}
		if len(rrs) > 0 {
			continue
		}
		undo := plan{change: pl.change, remove: []fleet.DNSRecordSet{ownerSet(p.owner, pl.change.RecordID, *pl.change.Upsert)},
			add: pl.remove, absent: []fleet.DNSRecordSet{{Name: name, Type: fleet.DNSRecordCNAME}}}
		if err := p.update(ctx, zone, []plan{undo}); err != nil {
			return fmt.Errorf("RFC2136.Apply(%s): putting back a name whose CNAME the server ignored: %w", zone.Zone.Name, err)
		}
		conflicts[pl.change.RecordID] = "the name holds records a CNAME cannot live beside"
	}
	if len(conflicts) > 0 {
		return &fleet.DNSRefusal{Reason: "names hold records this deployment does not own", Conflicts: conflicts}
	}
	return nil
}

// rfc2136Reads is how many names Apply reads at once.
const rfc2136Reads = 16

// readAll reads the names of changes, rfc2136Reads at once; the first
// error is returned.
func (p *RFC2136) readAll(ctx context.Context, zone fleet.DNSZoneAccess, changes []fleet.DNSChange) ([]nameState, error) {
	states := make([]nameState, len(changes))
	errs := make([]error, len(changes))
	var wg sync.WaitGroup
	slots := make(chan struct{}, rfc2136Reads)
	for i, c := range changes {
		if c.Upsert == nil && c.Previous == nil {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			states[i], errs[i] = p.read(ctx, zone, changeName(c))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return states, nil
}

// read asks the primary what name and its ownership name hold.
func (p *RFC2136) read(ctx context.Context, zone fleet.DNSZoneAccess, name string) (nameState, error) {
	st := nameState{sets: map[fleet.DNSRecordType]fleet.DNSRecordSet{}}
	for t, qtype := range queryTypes {
		rrs, err := p.query(ctx, zone, name, qtype)
		if err != nil {
			return st, err
		}
		if set, ok := setOf(name, t, rrs); ok {
			st.sets[t] = set
		}
	}
	// A server may answer ANY with one set only (RFC 8482, as Knot does):
	// any set of another type says the name holds other data.
	rrs, err := p.query(ctx, zone, name, dns.TypeANY)
	if err != nil {
		return st, err
	}
	for _, rr := range rrs {
		if _, ours := typeNames[rr.Header().Rrtype]; !ours && rr.Header().Rrtype != dns.TypeRRSIG && rr.Header().Rrtype != dns.TypeNSEC {
			st.other = true
		}
	}
	rrs, err = p.query(ctx, zone, ownerName(name), dns.TypeTXT)
	if err != nil {
		return st, err
	}
	if set, ok := setOf(ownerName(name), ownerTXT, rrs); ok {
		st.owner = &set
	}
	return st, nil
}

// typeNames are the record types by their DNS type.
var typeNames = map[uint16]fleet.DNSRecordType{dns.TypeCNAME: fleet.DNSRecordCNAME, dns.TypeA: fleet.DNSRecordA,
	dns.TypeAAAA: fleet.DNSRecordAAAA}

// setOf returns the set of type t in an answer's records at name.
func setOf(name string, t fleet.DNSRecordType, rrs []dns.RR) (fleet.DNSRecordSet, bool) {
	set := fleet.DNSRecordSet{Name: name, Type: t}
	for _, rr := range rrs {
		switch v := rr.(type) {
		case *dns.CNAME:
			set.Values = append(set.Values, fleet.NormalizeDNSName(v.Target))
		case *dns.A:
			set.Values = append(set.Values, v.A.String())
		case *dns.AAAA:
			set.Values = append(set.Values, v.AAAA.String())
		case *dns.TXT:
			set.Values = append(set.Values, strings.Join(v.Txt, ""))
		default:
			continue
		}
		set.TTL = int(rr.Header().Ttl)
	}
	return set, len(set.Values) > 0
}

// query asks the primary, without recursion, for name's records of qtype:
// only those at that exact name and of that type (ANY: every type).
func (p *RFC2136) query(ctx context.Context, zone fleet.DNSZoneAccess, name string, qtype uint16) ([]dns.RR, error) {
	server := zone.Zone.RFC2136.Server
	q := new(dns.Msg)
	q.SetQuestion(dns.CanonicalName(name), qtype)
	q.RecursionDesired = false
	q.SetEdns0(ednsSize, false)
	resp, _, err := (&dns.Client{Net: "tcp", Timeout: p.timeout}).ExchangeContext(ctx, q, server)
	switch {
	case err != nil:
		return nil, fmt.Errorf("RFC2136.Apply(%s): reading %s: %w", zone.Zone.Name, name, err)
	case resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError:
		return nil, fmt.Errorf("RFC2136.Apply(%s): reading %s: the server answered %s", zone.Zone.Name, name, dns.RcodeToString[resp.Rcode])
	case !resp.Authoritative:
		return nil, fmt.Errorf("RFC2136.Apply(%s): reading %s: the answer is not authoritative", zone.Zone.Name, name)
	}
	var out []dns.RR
	for _, rr := range resp.Answer {
		h := rr.Header()
		if strings.EqualFold(h.Name, q.Question[0].Name) && (qtype == dns.TypeANY || h.Rrtype == qtype) {
			out = append(out, rr)
		}
	}
	return out, nil
}

// updateMessage builds the UPDATE of plans to zone: their prerequisites,
// then their removals and additions in order.
func updateMessage(zone string, plans []plan) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	for _, pl := range plans {
		for _, s := range pl.remove {
			rrs, err := recordsOf(s)
			if err != nil {
				return nil, err
			}
			m.Used(rrs)
		}
		for _, s := range pl.absent {
			qtype := dns.TypeTXT
			if s.Type != ownerTXT {
				qtype = queryTypes[s.Type]
			}
			m.RRsetNotUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: dns.CanonicalName(s.Name), Rrtype: qtype}}})
		}
		if pl.free != "" {
			m.NameNotUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: dns.CanonicalName(pl.free)}}})
		}
	}
	for _, pl := range plans {
		for _, s := range pl.remove {
			rrs, err := recordsOf(s)
			if err != nil {
				return nil, err
			}
			m.Remove(rrs)
		}
		for _, s := range pl.add {
			rrs, err := recordsOf(s)
			if err != nil {
				return nil, err
			}
			m.Insert(rrs)
		}
	}
	return m, nil
}

// recordsOf returns a set's resource records.
func recordsOf(s fleet.DNSRecordSet) ([]dns.RR, error) {
	rrs := make([]dns.RR, 0, len(s.Values))
	for _, v := range s.Values {
		hdr := dns.RR_Header{Name: dns.CanonicalName(s.Name), Class: dns.ClassINET, Ttl: uint32(s.TTL)}
		switch s.Type {
		case ownerTXT:
			hdr.Rrtype = dns.TypeTXT
			rrs = append(rrs, &dns.TXT{Hdr: hdr, Txt: []string{v}})
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
