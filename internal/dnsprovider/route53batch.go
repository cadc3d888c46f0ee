package dnsprovider

import (
	"slices"

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
// request, so that a type change (DELETE and CREATE) is atomic.
type group struct {
	change  fleet.DNSChange
	changes []types.Change
}

// name is the name the group's change is about.
func (g group) name() string {
	if g.change.Upsert != nil {
		return fleet.NormalizeDNSName(g.change.Upsert.Name)
	}
	return fleet.NormalizeDNSName(g.change.Previous.Name)
}

// planned returns a change's Route53 changes from Previous.
func planned(c fleet.DNSChange) (group, error) {
	g := group{change: c}
	switch {
	case c.Upsert == nil && c.Previous == nil:
	case c.Upsert == nil:
		g.changes = []types.Change{{Action: types.ChangeActionDelete, ResourceRecordSet: recordSet(*c.Previous)}}
	case c.Previous == nil:
		g.changes = []types.Change{{Action: types.ChangeActionCreate, ResourceRecordSet: recordSet(*c.Upsert)}}
	case c.Previous.Type == c.Upsert.Type && fleet.NormalizeDNSName(c.Previous.Name) == fleet.NormalizeDNSName(c.Upsert.Name):
		g.changes = []types.Change{{Action: types.ChangeActionUpsert, ResourceRecordSet: recordSet(*c.Upsert)}}
	default:
		g.changes = []types.Change{{Action: types.ChangeActionDelete, ResourceRecordSet: recordSet(*c.Previous)},
			{Action: types.ChangeActionCreate, ResourceRecordSet: recordSet(*c.Upsert)}}
	}
	if c.Upsert != nil && !slices.Contains(fleet.DNSRecordTypes(), c.Upsert.Type) {
		return g, &fleet.DNSRefusal{Reason: "record type " + string(c.Upsert.Type) + " is not supported"}
	}
	return g, nil
}

// recordSet converts a set to Route53's: names and CNAME targets fully
// qualified.
func recordSet(s fleet.DNSRecordSet) *types.ResourceRecordSet {
	rs := &types.ResourceRecordSet{Name: aws.String(fleet.NormalizeDNSName(s.Name) + "."), Type: types.RRType(s.Type),
		TTL: aws.Int64(int64(s.TTL))}
	for _, v := range s.Values {
		if s.Type == fleet.DNSRecordCNAME {
			v = fleet.NormalizeDNSName(v) + "."
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
