package dnsprovider

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Ownership: beside each name it writes, the fleet manager keeps a TXT, the
// ownership record, at fleet.DNSOwnerLabel + "." + name, whose one string
// names the deployment (its owner id), the record and the record's type:
//
//	heritage=fleet-manager,fleet-manager/owner=<owner id>,fleet-manager/record=<record id>,fleet-manager/type=<type>
//
// It is written, changed and removed in the same atomic change as the
// record. A change only ever removes the set the ownership record names
// (and the ownership record), exactly as it reads it; a name whose
// ownership record is someone else's, or that holds a set in the record's
// way without one, is refused, never overwritten. The ownership record is
// not at the name itself: a TXT there could not live beside a CNAME.

// ownerTTL is the ownership record's TTL: no one resolves it but the
// providers, so it does not follow the record's.
const ownerTTL = 300

// ownerTXT is the ownership record's type.
const ownerTXT fleet.DNSRecordType = "TXT"

// heritage starts every ownership record's text.
const heritage = "heritage=fleet-manager"

// Keys of an ownership record's text.
const (
	ownerKey  = "fleet-manager/owner="
	recordKey = "fleet-manager/record="
	typeKey   = "fleet-manager/type="
)

// DefaultOwnerID is the owner id of a Config that names none: the default
// service name.
const DefaultOwnerID = "fleet-manager"

// ownerIDPattern is what an owner id may hold: it goes into the ownership
// record's text, whose separators it must not hold.
var ownerIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// ownerName returns the name of name's ownership record.
func ownerName(name string) string { return fleet.DNSOwnerLabel + "." + fleet.NormalizeDNSName(name) }

// ownedName returns the record name an ownership record's name is for, or
// the name itself when it is not an ownership record's.
func ownedName(name string) string {
	name = fleet.NormalizeDNSName(name)
	if rest, ok := strings.CutPrefix(name, fleet.DNSOwnerLabel+"."); ok {
		return rest
	}
	return name
}

// ownership is an ownership record's text, parsed.
type ownership struct {
	owner, record string
	typ           fleet.DNSRecordType
}

func (o ownership) text() string {
	return heritage + "," + ownerKey + o.owner + "," + recordKey + o.record + "," + typeKey + string(o.typ)
}

// parseOwnership parses an ownership record's text; false when it is not
// one of ours.
func parseOwnership(text string) (ownership, bool) {
	parts := strings.Split(text, ",")
	if len(parts) == 0 || parts[0] != heritage {
		return ownership{}, false
	}
	var o ownership
	for _, p := range parts[1:] {
		switch {
		case strings.HasPrefix(p, ownerKey):
			o.owner = strings.TrimPrefix(p, ownerKey)
		case strings.HasPrefix(p, recordKey):
			o.record = strings.TrimPrefix(p, recordKey)
		case strings.HasPrefix(p, typeKey):
			o.typ = fleet.DNSRecordType(strings.TrimPrefix(p, typeKey))
		}
	}
	return o, o.owner != "" && o.record != "" && slices.Contains(fleet.DNSRecordTypes(), o.typ)
}

// ownerSet returns the ownership record of set, written by owner for
// record.
func ownerSet(owner, record string, set fleet.DNSRecordSet) fleet.DNSRecordSet {
	return fleet.DNSRecordSet{Name: ownerName(set.Name), Type: ownerTXT, TTL: ownerTTL,
		Values: []string{ownership{owner: owner, record: record, typ: set.Type}.text()}}
}

// nameState is what a name and its ownership name hold, as a provider read
// them (or as the fleet manager last wrote them).
type nameState struct {
	// owner is the TXT set at the ownership name, nil when there is none.
	owner *fleet.DNSRecordSet
	// sets are the name's sets of the record types (CNAME, A, AAAA).
	sets map[fleet.DNSRecordType]fleet.DNSRecordSet
	// other is set when the name is known to hold sets of other types
	// (Route53 lists them; a DNS server's answers to ANY are not complete).
	other bool
}

// written returns the state the fleet manager left a name in when it last
// wrote set for record (nothing when set is nil).
func written(owner, record string, set *fleet.DNSRecordSet) nameState {
	st := nameState{sets: map[fleet.DNSRecordType]fleet.DNSRecordSet{}}
	if set != nil {
		o := ownerSet(owner, record, *set)
		st.owner, st.sets[set.Type] = &o, *set
	}
	return st
}

// plan is one change as a provider sends it.
type plan struct {
	change fleet.DNSChange
	// remove are the sets the change deletes, exactly: they must be there as
	// they are (an RFC 2136 prerequisite; Route53's DELETE checks it).
	remove []fleet.DNSRecordSet
	// add are the sets the change creates.
	add []fleet.DNSRecordSet
	// absent are the sets (name and type) that must not be there: an RFC
	// 2136 prerequisite; Route53's CREATE checks it.
	absent []fleet.DNSRecordSet
	// free is a name that must hold nothing (a CNAME's, where nothing of
	// ours was): an RFC 2136 prerequisite; Route53 refuses such a CNAME.
	free string
	// toCNAME is a change from another type of ours to a CNAME: a DNS
	// server ignores a CNAME added beside other data, which no prerequisite
	// can exclude, so the provider checks it after the update.
	toCNAME bool
}

// decide plans change from what its name holds, for owner; a non-empty
// conflict says why the name is not ours to write (a delete never
// conflicts: it removes only what is ours, else nothing).
func decide(owner string, c fleet.DNSChange, st nameState) (p plan, conflict string) {
	p.change = c
	name := changeName(c)
	var ownedType fleet.DNSRecordType
	switch o, parsed := st.ownerText(); {
	case st.owner != nil && parsed && o.owner == owner && o.record == c.RecordID:
		ownedType = o.typ
		p.remove = append(p.remove, *st.owner)
	case st.owner != nil:
		if c.Upsert == nil {
			return p, ""
		}
		return p, "the name's ownership record names another owner or record"
	case c.Previous != nil && st.hasValues(*c.Previous):
		// Written before ownership records were: the set is still as this
		// deployment wrote it, so it is taken over.
		ownedType = c.Previous.Type
	}
	owned, haveOwned := st.sets[ownedType]
	if haveOwned {
		p.remove = append(p.remove, owned)
	}
	if c.Upsert == nil {
		return p, ""
	}
	u := *c.Upsert
	for _, t := range fleet.DNSRecordTypes() {
		if _, there := st.sets[t]; !there || (haveOwned && t == ownedType) {
			continue
		}
		switch {
		case t == u.Type:
			return p, "the name holds a " + string(t) + " set this deployment did not write"
		case t == fleet.DNSRecordCNAME:
			return p, "the name holds a CNAME this deployment did not write"
		case u.Type == fleet.DNSRecordCNAME:
			return p, "the name holds records a CNAME cannot live beside"
		}
	}
	if u.Type == fleet.DNSRecordCNAME && st.other {
		return p, "the name holds records a CNAME cannot live beside"
	}
	if st.owner == nil {
		p.absent = append(p.absent, fleet.DNSRecordSet{Name: ownerName(name), Type: ownerTXT})
	}
	if !haveOwned || ownedType != u.Type {
		p.absent = append(p.absent, fleet.DNSRecordSet{Name: name, Type: u.Type})
	}
	switch {
	case u.Type == fleet.DNSRecordCNAME && !haveOwned:
		p.free = name
	case u.Type == fleet.DNSRecordCNAME && ownedType != fleet.DNSRecordCNAME:
		p.toCNAME = true
	case !haveOwned || ownedType != fleet.DNSRecordCNAME:
		p.absent = append(p.absent, fleet.DNSRecordSet{Name: name, Type: fleet.DNSRecordCNAME})
	}
	p.add = append(p.add, u, ownerSet(owner, c.RecordID, u))
	return p, ""
}

// changeName returns the name a change is about, normalized.
func changeName(c fleet.DNSChange) string {
	if c.Upsert != nil {
		return fleet.NormalizeDNSName(c.Upsert.Name)
	}
	return fleet.NormalizeDNSName(c.Previous.Name)
}

// ownerText parses the state's ownership record: one string of ours.
func (st nameState) ownerText() (ownership, bool) {
	if st.owner == nil || len(st.owner.Values) != 1 {
		return ownership{}, false
	}
	return parseOwnership(st.owner.Values[0])
}

// hasValues reports whether the name holds set's values (whatever its TTL).
func (st nameState) hasValues(set fleet.DNSRecordSet) bool {
	got, ok := st.sets[set.Type]
	return ok && sameValues(set.Type, got.Values, set.Values)
}

// sameValues compares two sets' values: host names as normalized,
// addresses by value.
func sameValues(t fleet.DNSRecordType, a, b []string) bool {
	norm := func(vs []string) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = fleet.NormalizeDNSName(v)
			if t == fleet.DNSRecordA || t == fleet.DNSRecordAAAA {
				if a, err := netip.ParseAddr(v); err == nil {
					out[i] = a.String()
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

// validChange refuses a change the provider cannot plan: one without a
// record id (the ownership record names it), or an upsert and a previous
// set of different names (a record's name never changes).
func validChange(c fleet.DNSChange) *fleet.DNSRefusal {
	switch {
	case c.Upsert == nil && c.Previous == nil:
		return nil
	case c.RecordID == "" || strings.ContainsAny(c.RecordID, ",= \"\\"):
		return &fleet.DNSRefusal{Reason: "a change has no valid record id"}
	case c.Upsert != nil && c.Previous != nil && fleet.NormalizeDNSName(c.Upsert.Name) != fleet.NormalizeDNSName(c.Previous.Name):
		return &fleet.DNSRefusal{Reason: "a change moves a record to another name"}
	case c.Upsert != nil && !slices.Contains(fleet.DNSRecordTypes(), c.Upsert.Type):
		return &fleet.DNSRefusal{Reason: "record type " + string(c.Upsert.Type) + " is not supported"}
	case len(ownerName(changeName(c))) > 253:
		return &fleet.DNSRefusal{Reason: "the name leaves no room for its ownership record"}
	}
	return nil
}
