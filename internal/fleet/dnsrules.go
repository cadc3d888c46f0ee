package fleet

import (
	"net/netip"
	"slices"
	"time"
)

// PendingDNSConditions are a record's conditions when its generation is
// new: accepted by its policy, not yet published nor resolvable.
func PendingDNSConditions(cs Conditions, generation int64, now time.Time) Conditions {
	cs = cs.MarkTrue(DNSConditionAccepted, DNSReasonAccepted, "", generation, now)
	cs = cs.MarkFalse(DNSConditionPublished, DNSReasonPending, "the change waits for its zone's next pass", generation, now)
	return cs.MarkUnknown(DNSConditionResolvable, DNSReasonPending, "not published yet", generation, now)
}

// CanonicalDNSTargets writes targets the one way they are stored and
// compared: host names normalized (NormalizeDNSName), addresses in their
// canonical form except in a CNAME, sorted (a set of records has no order).
// targets itself is left alone.
func CanonicalDNSTargets(t DNSRecordType, targets []string) []string {
	out := make([]string, len(targets))
	for i, v := range targets {
		if a, err := netip.ParseAddr(v); err == nil && t != DNSRecordCNAME {
			out[i] = a.String()
		} else {
			out[i] = NormalizeDNSName(v)
		}
	}
	slices.Sort(out)
	return out
}
