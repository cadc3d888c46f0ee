package dnstest

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// rrset is a simple record set of the hosted zone (no alias, no routing
// policy: the contract server refuses those).
type rrset struct {
	Name   string // lowercase, fully qualified
	Type   string
	TTL    int64
	Values []string
}

type setKey struct{ name, typ string }

// change is an accepted batch with the zone as it left it.
type change struct {
	id        string
	submitted time.Time
	polls     int
	zone      map[setKey]rrset
}

// Route53's documented quotas of one ChangeResourceRecordSets request.
const (
	maxRecordElements = 1000
	maxValueChars     = 32000
	maxListItems      = 300
)

// fqdn lowercases a name and ends it with a dot.
func fqdn(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) + "." }

// within reports whether name (fully qualified) is apex or below it.
func within(name, apex string) bool { return name == apex || strings.HasSuffix(name, "."+apex) }

// reversedLabels is the key Route53 sorts names by: com.example.www.
func reversedLabels(name string) string {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".")
}

func compareSets(a, b setKey) int {
	return cmp.Or(strings.Compare(reversedLabels(a.name), reversedLabels(b.name)), strings.Compare(a.typ, b.typ))
}

// batchChange is one change of a request, decoded.
type batchChange struct {
	Action string
	Set    rrset
}

// apply applies a batch to a copy of zone, in order, and returns the copy
// or every message of Route53's InvalidChangeBatch.
func apply(zone map[setKey]rrset, apex string, batch []batchChange) (map[setKey]rrset, []string) {
	elements, chars := 0, 0
	for _, c := range batch {
		factor := 1
		if c.Action == "UPSERT" {
			factor = 2
		}
		for _, v := range c.Set.Values {
			elements += factor
			chars += factor * len(v)
		}
	}
	if elements > maxRecordElements {
		return nil, []string{fmt.Sprintf("Number of records limit of %d exceeded.", maxRecordElements)}
	}
	if chars > maxValueChars {
		return nil, []string{fmt.Sprintf("Number of characters in all Value elements limit of %d exceeded.", maxValueChars)}
	}
	next := maps.Clone(zone)
	var msgs []string
	for _, c := range batch {
		s := c.Set
		k := setKey{s.Name, s.Type}
		desc := fmt.Sprintf("resource record set [name='%s', type='%s']", s.Name, s.Type)
		if !within(s.Name, apex) {
			msgs = append(msgs, fmt.Sprintf("RRSet with DNS name %s is not permitted in zone %s", s.Name, apex))
			continue
		}
		if msg := invalidValue(s); msg != "" {
			msgs = append(msgs, msg)
			continue
		}
		cur, exists := next[k]
		switch c.Action {
		case "CREATE":
			if exists {
				msgs = append(msgs, "Tried to create "+desc+" but it already exists")
				continue
			}
		case "DELETE":
			switch {
			case !exists:
				msgs = append(msgs, "Tried to delete "+desc+" but it was not found")
			case cur.TTL != s.TTL || !sameValues(cur.Values, s.Values):
				msgs = append(msgs, "Tried to delete "+desc+" but the values provided do not match the current values")
			default:
				delete(next, k)
			}
			continue
		}
		if msg := cnameConflict(next, s, apex); msg != "" {
			msgs = append(msgs, msg)
			continue
		}
		next[k] = s
	}
	if len(msgs) > 0 {
		return nil, msgs
	}
	return next, nil
}

// invalidValue returns Route53's message for a value its type cannot hold.
func invalidValue(s rrset) string {
	for _, v := range s.Values {
		a, err := netip.ParseAddr(v)
		switch {
		case s.Type == "A" && (err != nil || !a.Is4()):
			return fmt.Sprintf("Invalid Resource Record: 'FATAL problem: ARRDATAIllegalIPv4Address (Value is not a valid IPv4 address) encountered with '%s''", v)
		case s.Type == "AAAA" && (err != nil || !a.Is6() || a.Is4In6()):
			return fmt.Sprintf("Invalid Resource Record: 'FATAL problem: AAAARRDATAIllegalIPv6Address (Value is not a valid IPv6 address) encountered with '%s''", v)
		case s.Type == "TXT" && (len(v) < 2 || !strings.HasPrefix(v, `"`) || !strings.HasSuffix(v, `"`)):
			return fmt.Sprintf("Invalid Resource Record: 'FATAL problem: InvalidCharacterString (Value should be enclosed in quotation marks) encountered with '%s''", v)
		case s.Type == "CNAME" && (len(s.Values) != 1 || strings.ContainsAny(v, " \t")):
			return fmt.Sprintf("Invalid Resource Record: 'FATAL problem: RRDATANotSingleField (Value contains spaces) encountered with '%s''", v)
		}
	}
	return ""
}

// cnameConflict returns Route53's message when s and a CNAME would share a
// name.
func cnameConflict(zone map[setKey]rrset, s rrset, apex string) string {
	for k := range zone {
		switch {
		case k.name != s.Name || k.typ == s.Type:
		case s.Type == "CNAME":
			return fmt.Sprintf("RRSet of type CNAME with DNS name %s is not permitted as it conflicts with other records with the same DNS name in zone %s", s.Name, apex)
		case k.typ == "CNAME":
			return fmt.Sprintf("RRSet of type %s with DNS name %s is not permitted because a conflicting RRSet of type CNAME with the same DNS name already exists in zone %s", s.Type, s.Name, apex)
		}
	}
	return ""
}

func sameValues(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// list returns up to max sets from (name, typ) on, in Route53's order, and
// the next set's key when there are more.
func list(zone map[setKey]rrset, name, typ string, max int) ([]rrset, *setKey) {
	keys := slices.SortedFunc(maps.Keys(zone), compareSets)
	start := setKey{name, typ}
	var out []rrset
	for _, k := range keys {
		if name != "" && compareSets(k, start) < 0 {
			continue
		}
		if len(out) == max {
			return out, &k
		}
		out = append(out, zone[k])
	}
	return out, nil
}
