package dnsprovider

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// readRoute53 reads what name and its ownership name hold.
func readRoute53(ctx context.Context, client *route53.Client, zoneID, name string) (nameState, error) {
	st := nameState{sets: map[fleet.DNSRecordType]fleet.DNSRecordSet{}}
	out, err := client.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(zoneID),
		StartRecordName: aws.String(name + "."), MaxItems: aws.Int32(route53ListPage)})
	if err != nil {
		return st, err
	}
	for _, rs := range out.ResourceRecordSets {
		if fleet.NormalizeDNSName(aws.ToString(rs.Name)) != name {
			continue
		}
		if t := fleet.DNSRecordType(rs.Type); slices.Contains(fleet.DNSRecordTypes(), t) {
			st.sets[t] = fromRoute53(rs)
		} else {
			st.other = true
		}
	}
	owner := ownerName(name)
	out, err = client.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(zoneID),
		StartRecordName: aws.String(owner + "."), StartRecordType: types.RRTypeTxt, MaxItems: aws.Int32(1)})
	if err != nil {
		return st, err
	}
	for _, rs := range out.ResourceRecordSets {
		if fleet.NormalizeDNSName(aws.ToString(rs.Name)) == owner && rs.Type == types.RRTypeTxt {
			set := fromRoute53(rs)
			st.owner = &set
		}
	}
	return st, nil
}

// fromRoute53 converts a Route53 set: its name normalized, TXT strings
// unquoted (an alias or routing-policy set has no values: it is never one
// of ours).
func fromRoute53(rs types.ResourceRecordSet) fleet.DNSRecordSet {
	s := fleet.DNSRecordSet{Name: fleet.NormalizeDNSName(aws.ToString(rs.Name)), Type: fleet.DNSRecordType(rs.Type),
		TTL: int(aws.ToInt64(rs.TTL))}
	for _, r := range rs.ResourceRecords {
		v := aws.ToString(r.Value)
		if rs.Type == types.RRTypeTxt {
			v = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, `"`), `"`), `" "`, "")
		}
		s.Values = append(s.Values, v)
	}
	if rs.SetIdentifier != nil || rs.AliasTarget != nil {
		s.Values = append(s.Values, "")
	}
	return s
}

// Route53's messages of an InvalidChangeBatch that say a set is not as
// Previous said.
var driftMessages = []string{"but it already exists", "but it was not found", "but the values provided do not match the current values",
	"conflicts with other records with the same DNS name", "because a conflicting RRSet of type"}

// driftedNames returns the names an InvalidChangeBatch names when every one
// of its messages is about drift, else nil.
func driftedNames(err error) map[string]bool {
	var icb *types.InvalidChangeBatch
	if !errors.As(err, &icb) {
		return nil
	}
	messages := icb.Messages
	if len(messages) == 0 {
		// The ErrorResponse shape holds the messages in one, in brackets.
		messages = splitMessages(aws.ToString(icb.Message))
	}
	names := map[string]bool{}
	for _, m := range messages {
		if !slices.ContainsFunc(driftMessages, func(d string) bool { return strings.Contains(m, d) }) {
			return nil
		}
		name := messageName(m)
		if name == "" {
			return nil
		}
		names[ownedName(name)] = true
	}
	return names
}

// splitMessages splits "[m1, m2]" into its messages.
func splitMessages(s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []string
	for _, start := range []string{", Tried to ", ", RRSet "} {
		s = strings.ReplaceAll(s, start, "\x00"+start[2:])
	}
	for m := range strings.SplitSeq(s, "\x00") {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

// messageName returns the name a drift message is about, normalized.
func messageName(m string) string {
	if _, rest, ok := strings.Cut(m, "name='"); ok {
		name, _, _ := strings.Cut(rest, "'")
		return fleet.NormalizeDNSName(name)
	}
	if _, rest, ok := strings.Cut(m, "with DNS name "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return fleet.NormalizeDNSName(name)
	}
	return ""
}
