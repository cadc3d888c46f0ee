package dnsprovider

import (
	"fmt"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestChunksKeepRoute53Limits: chunks cut a batch where the next change
// would pass either limit of a request, value characters or elements, and
// never split a change's DELETEs and CREATEs (record and ownership record).
func TestChunksKeepRoute53Limits(t *testing.T) {
	t.Parallel()
	long := func(i, j int) string { return fmt.Sprintf("2001:0db8:0000:0000:0000:0000:%04x:%04x", i, j) }
	for _, tc := range []struct {
		name    string
		changes func(i int) fleet.DNSChange
		bound   string
	}{
		{"changes of long values hit the characters", func(i int) fleet.DNSChange {
			var values []string
			for j := range 8 {
				values = append(values, long(i, j))
			}
			s := fleet.DNSRecordSet{Name: fmt.Sprintf("n%d.example.test", i), Type: fleet.DNSRecordAAAA, TTL: 60, Values: values}
			return fleet.DNSChange{Upsert: &s, Previous: &s}
		}, "chars"},
		{"type changes of many short values hit the elements", func(i int) fleet.DNSChange {
			name := fmt.Sprintf("n%d.example.test", i)
			var values []string
			for j := range 8 {
				values = append(values, fmt.Sprintf("10.0.0.%d", j+1))
			}
			return fleet.DNSChange{Upsert: &fleet.DNSRecordSet{Name: name, Type: fleet.DNSRecordA, TTL: 60, Values: values},
				Previous: &fleet.DNSRecordSet{Name: name, Type: fleet.DNSRecordCNAME, TTL: 60, Values: []string{"a.example.net"}}}
		}, "elements"},
	} {
		var groups []group
		for i := range 400 {
			c := tc.changes(i)
			c.RecordID = fmt.Sprintf("r%d", i)
			pl, conflict := decide("test", c, written("test", c.RecordID, c.Previous))
			if conflict != "" {
				t.Fatal(conflict)
			}
			groups = append(groups, group{change: c, changes: route53Changes(pl)})
		}
		out := chunks(groups)
		total, boundHit := 0, false
		for i, chunk := range out {
			elements, chars := 0, 0
			for _, g := range chunk {
				e, c := cost(g.changes)
				elements, chars = elements+e, chars+c
			}
			total += len(chunk)
			if elements > route53MaxElements || chars > route53MaxValueChars {
				t.Errorf("%s: chunk %d holds %d elements and %d characters, over a request's limits", tc.name, i, elements, chars)
			}
			if i < len(out)-1 {
				e, c := cost(out[i+1][0].changes)
				switch {
				case elements+e <= route53MaxElements && chars+c <= route53MaxValueChars:
					t.Errorf("%s: chunk %d was cut though the next change fits", tc.name, i)
				case tc.bound == "chars" && chars+c > route53MaxValueChars, tc.bound == "elements" && elements+e > route53MaxElements:
					boundHit = true
				}
			}
		}
		if total != len(groups) || len(out) < 2 || !boundHit {
			t.Errorf("%s: %d chunks of %d changes (of %d); want several, cut by the %s", tc.name, len(out), total, len(groups), tc.bound)
		}
	}
}
