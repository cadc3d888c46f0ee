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

// healed rebuilds a group from the name's sets as Route53 holds them: every
// CNAME, A and AAAA set at the name is deleted exactly, but the upsert's
// type, which is UPSERT.
func healed(ctx context.Context, client *route53.Client, zoneID string, g group) (group, error) {
	name := g.name()
	out, err := client.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(zoneID),
		StartRecordName: aws.String(name + "."), MaxItems: aws.Int32(route53ListPage)})
	if err != nil {
		return g, err
	}
	g.changes = nil
	for _, rs := range out.ResourceRecordSets {
		t := fleet.DNSRecordType(rs.Type)
		if fleet.NormalizeDNSName(aws.ToString(rs.Name)) != name || !slices.Contains(fleet.DNSRecordTypes(), t) ||
			(g.change.Upsert != nil && t == g.change.Upsert.Type) {
			continue
		}
		g.changes = append(g.changes, types.Change{Action: types.ChangeActionDelete, ResourceRecordSet: &rs})
	}
	if g.change.Upsert != nil {
		g.changes = append(g.changes, types.Change{Action: types.ChangeActionUpsert, ResourceRecordSet: recordSet(*g.change.Upsert)})
	}
	return g, nil
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
		names[name] = true
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
