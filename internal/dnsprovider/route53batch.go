package dnsprovider

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Route53's documented limits of one ChangeResourceRecordSets request: at
// most route53MaxElements ResourceRecord elements and route53MaxValueChars
// characters in Value elements, an UPSERT's counting twice.
const (
	route53MaxElements   = 1000
	route53MaxValueChars = 32000
	// route53ListPage is what one ListResourceRecordSets call returns at
	// most (Route53's maximum).
	route53ListPage = 300
)

// group is the Route53 changes of one fleet.DNSChange: they stay in one
// request, so that a change of a record and its ownership record is
// atomic.
type group struct {
	change  fleet.DNSChange
	changes []types.Change
}

// name is the name the group's change is about.
func (g group) name() string { return changeName(g.change) }

// route53Changes returns a plan's Route53 changes: a DELETE of each set it
// removes, exactly, then a CREATE of each it adds.
func route53Changes(pl plan) []types.Change {
	var out []types.Change
	for _, s := range pl.remove {
		out = append(out, types.Change{Action: types.ChangeActionDelete, ResourceRecordSet: recordSet(s)})
	}
	for _, s := range pl.add {
		out = append(out, types.Change{Action: types.ChangeActionCreate, ResourceRecordSet: recordSet(s)})
	}
	return out
}

// recordSet converts a set to Route53's: names and CNAME targets fully
// qualified, TXT strings quoted.
func recordSet(s fleet.DNSRecordSet) *types.ResourceRecordSet {
	rs := &types.ResourceRecordSet{Name: aws.String(fleet.NormalizeDNSName(s.Name) + "."), Type: types.RRType(s.Type),
		TTL: aws.Int64(int64(s.TTL))}
	for _, v := range s.Values {
		switch s.Type {
		case fleet.DNSRecordCNAME:
			v = fleet.NormalizeDNSName(v) + "."
		case ownerTXT:
			v = `"` + v + `"`
		}
		rs.ResourceRecords = append(rs.ResourceRecords, types.ResourceRecord{Value: aws.String(v)})
	}
	return rs
}

// cost returns what changes count against a request's limits.
func cost(changes []types.Change) (elements, chars int) {
	for _, c := range changes {
		factor := 1
		if c.Action == types.ChangeActionUpsert {
			factor = 2
		}
		for _, r := range c.ResourceRecordSet.ResourceRecords {
			elements += factor
			chars += factor * len(aws.ToString(r.Value))
		}
	}
	return elements, chars
}

// chunks splits groups, in order, into requests within Route53's limits.
// A group larger than a request alone (which a record's few values cannot
// make) is a request of its own, that Route53 refuses.
func chunks(groups []group) [][]group {
	var out [][]group
	var cur []group
	elements, chars := 0, 0
	for _, g := range groups {
		e, c := cost(g.changes)
		if len(cur) > 0 && (elements+e > route53MaxElements || chars+c > route53MaxValueChars) {
			out, cur, elements, chars = append(out, cur), nil, 0, 0
		}
		cur = append(cur, g)
		elements, chars = elements+e, chars+c
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
