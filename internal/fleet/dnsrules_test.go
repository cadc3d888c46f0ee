package fleet_test

import (
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestPendingDNSConditions(t *testing.T) {
	t.Parallel()
	accepted := fleet.Condition{Type: fleet.DNSConditionAccepted, Status: fleet.ConditionTrue, Reason: fleet.DNSReasonAccepted}
	published := fleet.Condition{Type: fleet.DNSConditionPublished, Status: fleet.ConditionFalse, Reason: fleet.DNSReasonPending,
		Message: "the change waits for its zone's next pass"}
	resolvable := fleet.Condition{Type: fleet.DNSConditionResolvable, Status: fleet.ConditionUnknown, Reason: fleet.DNSReasonPending,
		Message: "not published yet"}
	// want is c at generation gen, last moved at when.
	want := func(c fleet.Condition, gen int64, when bool) fleet.Condition {
		c.ObservedGeneration, c.LastTransitionTime = gen, condT0
		if when {
			c.LastTransitionTime = condT1
		}
		return c
	}
	ready := fleet.Conditions{condAt(fleet.DNSConditionAccepted, fleet.ConditionTrue, fleet.DNSReasonAccepted),
		condAt(fleet.DNSConditionPublished, fleet.ConditionTrue, fleet.DNSReasonPublished),
		condAt(fleet.DNSConditionResolvable, fleet.ConditionTrue, fleet.DNSReasonAnswered)}
	tests := []struct {
		name       string
		cs         fleet.Conditions
		generation int64
		want       fleet.Conditions
	}{
		{"a new record", nil, 1, fleet.Conditions{want(accepted, 1, true), want(published, 1, true), want(resolvable, 1, true)}},
		{"a ready record's new generation: Accepted keeps its time, the others move", ready, 2,
			fleet.Conditions{want(accepted, 2, false), want(published, 2, true), want(resolvable, 2, true)}},
		{"a record refused by its provider", fleet.Conditions{condAt(fleet.DNSConditionAccepted, fleet.ConditionTrue, fleet.DNSReasonAccepted),
			condAt(fleet.DNSConditionPublished, fleet.ConditionFalse, fleet.DNSReasonProviderRefused),
			condAt(fleet.DNSConditionResolvable, fleet.ConditionUnknown, fleet.DNSReasonPending)}, 5,
			fleet.Conditions{want(accepted, 5, false), want(published, 5, false), want(resolvable, 5, false)}},
		{"other conditions are kept", fleet.Conditions{condAt("Other", fleet.ConditionTrue, "Kept")}, 3,
			fleet.Conditions{condAt("Other", fleet.ConditionTrue, "Kept"), want(accepted, 3, true), want(published, 3, true), want(resolvable, 3, true)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := append(fleet.Conditions(nil), tc.cs...)
			got := fleet.PendingDNSConditions(tc.cs, tc.generation, condT1)
			if !slices.Equal(got, tc.want) {
				t.Errorf("PendingDNSConditions(%+v, %d) =\n%+v, want\n%+v", tc.cs, tc.generation, got, tc.want)
			}
			if !before.Equal(tc.cs) {
				t.Errorf("PendingDNSConditions modified its argument: %+v, was %+v", tc.cs, before)
			}
			if phase := fleet.DNSRecordPhase(got, false); phase != fleet.DNSPhasePending {
				t.Errorf("PendingDNSConditions(...) gives phase %q, want %q", phase, fleet.DNSPhasePending)
			}
		})
	}
}

func TestCanonicalDNSTargets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		typ     fleet.DNSRecordType
		targets []string
		want    []string
	}{
		{"a host name is normalized", fleet.DNSRecordCNAME, []string{"LB.Example.NET."}, []string{"lb.example.net"}},
		{"IPv6 addresses take their canonical form, sorted", fleet.DNSRecordAAAA, []string{"2001:DB8::2", "2001:db8:0::1"},
			[]string{"2001:db8::1", "2001:db8::2"}},
		{"IPv4 addresses are sorted", fleet.DNSRecordA, []string{"192.0.2.2", "192.0.2.1"}, []string{"192.0.2.1", "192.0.2.2"}},
		{"IPv4 sorts as text", fleet.DNSRecordA, []string{"192.0.2.10", "192.0.2.9"}, []string{"192.0.2.10", "192.0.2.9"}},
		{"an IPv4-mapped IPv6 address keeps its mapped form", fleet.DNSRecordAAAA, []string{"::FFFF:192.0.2.1"}, []string{"::ffff:192.0.2.1"}},
		{"in a CNAME an address is a name: lowercased, not compressed", fleet.DNSRecordCNAME, []string{"2001:DB8:0::1"}, []string{"2001:db8:0::1"}},
		{"in an A record a name is normalized", fleet.DNSRecordA, []string{"Host.Example.COM."}, []string{"host.example.com"}},
		{"duplicates are kept", fleet.DNSRecordA, []string{"192.0.2.1", "192.0.2.1"}, []string{"192.0.2.1", "192.0.2.1"}},
		{"no targets", fleet.DNSRecordA, nil, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := slices.Clone(tc.targets)
			got := fleet.CanonicalDNSTargets(tc.typ, tc.targets)
			if got == nil || !slices.Equal(got, tc.want) {
				t.Errorf("CanonicalDNSTargets(%s, %q) = %#v, want %#v", tc.typ, tc.targets, got, tc.want)
			}
			if !slices.Equal(before, tc.targets) {
				t.Errorf("CanonicalDNSTargets modified its argument: %q, was %q", tc.targets, before)
			}
		})
	}
}
