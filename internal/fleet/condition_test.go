package fleet_test

import (
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

var (
	condT0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	condT1 = time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC)
)

// condAt is a condition of type typ at condT0, for building the tables.
func condAt(typ string, status fleet.ConditionStatus, reason string) fleet.Condition {
	return fleet.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message", ObservedGeneration: 1, LastTransitionTime: condT0}
}

func TestConditionsSet(t *testing.T) {
	t.Parallel()
	placed := condAt(fleet.ConditionPlaced, fleet.ConditionTrue, fleet.ReasonHubSelected)
	accepted := condAt(fleet.ConditionAccepted, fleet.ConditionTrue, fleet.ReasonValidated)
	tests := []struct {
		name     string
		cs       fleet.Conditions
		set      fleet.Condition
		wantTime time.Time
	}{
		{"new condition in an empty set gets now", nil,
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionTrue, Reason: fleet.ReasonHubSelected}, condT1},
		{"new condition beside others gets now", fleet.Conditions{accepted},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionUnknown, Reason: fleet.ReasonNotPlaced}, condT1},
		{"same status, same reason keeps the time", fleet.Conditions{accepted, placed},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionTrue, Reason: fleet.ReasonHubSelected, Message: "placed message"}, condT0},
		{"same status, new reason and message keeps the time", fleet.Conditions{accepted, placed},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionTrue, Reason: "Moved", Message: "elsewhere", ObservedGeneration: 7}, condT0},
		{"True to False moves the time", fleet.Conditions{accepted, placed},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionFalse, Reason: fleet.ReasonNoHubAvailable}, condT1},
		{"True to Unknown moves the time", fleet.Conditions{placed, accepted},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionUnknown, Reason: fleet.ReasonNotPlaced}, condT1},
		{"a zero old time is set even when the status holds", fleet.Conditions{{Type: fleet.ConditionPlaced, Status: fleet.ConditionTrue}},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionTrue, Reason: fleet.ReasonHubSelected}, condT1},
		{"the caller's time is ignored", fleet.Conditions{placed},
			fleet.Condition{Type: fleet.ConditionPlaced, Status: fleet.ConditionTrue, LastTransitionTime: condT1.Add(time.Hour)}, condT0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := append(fleet.Conditions(nil), tc.cs...)
			got := tc.cs.Set(tc.set, condT1)
			c, ok := got.Get(tc.set.Type)
			if !ok {
				t.Fatalf("Set(%+v).Get(%s) found nothing", tc.set, tc.set.Type)
			}
			want := tc.set
			want.LastTransitionTime = tc.wantTime
			if c != want {
				t.Errorf("Set(%+v, %v) gives %+v, want %+v", tc.set, condT1, c, want)
			}
			wantLen := len(tc.cs)
			if _, existed := tc.cs.Get(tc.set.Type); !existed {
				wantLen++
			}
			if len(got) != wantLen {
				t.Errorf("Set(%+v) has %d conditions, want %d", tc.set, len(got), wantLen)
			}
			for _, other := range tc.cs {
				if other.Type == tc.set.Type {
					continue
				}
				if o, _ := got.Get(other.Type); o != other {
					t.Errorf("Set(%+v) changed %s to %+v, want it untouched %+v", tc.set, other.Type, o, other)
				}
			}
			if !before.Equal(tc.cs) || len(before) != len(tc.cs) {
				t.Errorf("Set(%+v) modified its receiver: %+v, was %+v", tc.set, tc.cs, before)
			}
		})
	}
}

func TestConditionsSetKeepsOrder(t *testing.T) {
	t.Parallel()
	cs := fleet.Conditions{condAt("A", fleet.ConditionTrue, "R"), condAt("B", fleet.ConditionTrue, "R"), condAt("C", fleet.ConditionTrue, "R")}
	got := cs.Set(fleet.Condition{Type: "B", Status: fleet.ConditionFalse, Reason: "S"}, condT1).Set(fleet.Condition{Type: "D", Status: fleet.ConditionTrue}, condT1)
	var types []string
	for _, c := range got {
		types = append(types, c.Type)
	}
	if len(types) != 4 || types[0] != "A" || types[1] != "B" || types[2] != "C" || types[3] != "D" {
		t.Errorf("Set(B).Set(D) order = %v, want [A B C D]", types)
	}
}

func TestConditionsSetNormalisesToUTC(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	got := fleet.Conditions{}.MarkTrue("A", "R", "", 1, now)
	if c, _ := got.Get("A"); c.LastTransitionTime.Location() != time.UTC || !c.LastTransitionTime.Equal(now) {
		t.Errorf("MarkTrue(A, %v).LastTransitionTime = %v, want the same instant in UTC", now, c.LastTransitionTime)
	}
}

func TestConditionsMark(t *testing.T) {
	t.Parallel()
	type markFunc func(cs fleet.Conditions, typ, reason, message string, gen int64, now time.Time) fleet.Conditions
	marks := []struct {
		name   string
		mark   markFunc
		status fleet.ConditionStatus
	}{
		{"MarkTrue", fleet.Conditions.MarkTrue, fleet.ConditionTrue},
		{"MarkFalse", fleet.Conditions.MarkFalse, fleet.ConditionFalse},
		{"MarkUnknown", fleet.Conditions.MarkUnknown, fleet.ConditionUnknown},
	}
	others := map[fleet.ConditionStatus]fleet.ConditionStatus{
		fleet.ConditionTrue: fleet.ConditionFalse, fleet.ConditionFalse: fleet.ConditionUnknown, fleet.ConditionUnknown: fleet.ConditionTrue,
	}
	for _, m := range marks {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			accepted := condAt(fleet.ConditionAccepted, fleet.ConditionTrue, fleet.ReasonValidated)
			tests := []struct {
				name     string
				cs       fleet.Conditions
				wantTime time.Time
			}{
				{"absent", fleet.Conditions{accepted}, condT1},
				{"same status", fleet.Conditions{accepted, condAt("X", m.status, "Old")}, condT0},
				{"other status", fleet.Conditions{accepted, condAt("X", others[m.status], "Old")}, condT1},
			}
			for _, tc := range tests {
				got := m.mark(tc.cs, "X", "New", "new message", 3, condT1)
				want := fleet.Condition{Type: "X", Status: m.status, Reason: "New", Message: "new message", ObservedGeneration: 3, LastTransitionTime: tc.wantTime}
				if c, _ := got.Get("X"); c != want {
					t.Errorf("%s: %s(X, New, new message, 3, %v) = %+v, want %+v", tc.name, m.name, condT1, c, want)
				}
				if a, _ := got.Get(fleet.ConditionAccepted); a != accepted {
					t.Errorf("%s: %s(X) changed Accepted to %+v", tc.name, m.name, a)
				}
				if len(got) != 2 {
					t.Errorf("%s: %s(X) has %d conditions, want 2", tc.name, m.name, len(got))
				}
			}
		})
	}
}

func TestConditionsAccessors(t *testing.T) {
	t.Parallel()
	cs := fleet.Conditions{condAt("A", fleet.ConditionTrue, "Ra"), condAt("B", fleet.ConditionFalse, "Rb")}
	tests := []struct {
		typ        string
		wantStatus fleet.ConditionStatus
		wantTrue   bool
		wantReason string
		wantFound  bool
	}{
		{"A", fleet.ConditionTrue, true, "Ra", true},
		{"B", fleet.ConditionFalse, false, "Rb", true},
		{"C", fleet.ConditionUnknown, false, "", false},
	}
	for _, tc := range tests {
		if got := cs.Status(tc.typ); got != tc.wantStatus {
			t.Errorf("Status(%s) = %s, want %s", tc.typ, got, tc.wantStatus)
		}
		if got := cs.IsTrue(tc.typ); got != tc.wantTrue {
			t.Errorf("IsTrue(%s) = %v, want %v", tc.typ, got, tc.wantTrue)
		}
		if got := cs.Reason(tc.typ); got != tc.wantReason {
			t.Errorf("Reason(%s) = %q, want %q", tc.typ, got, tc.wantReason)
		}
		if _, found := cs.Get(tc.typ); found != tc.wantFound {
			t.Errorf("Get(%s) found = %v, want %v", tc.typ, found, tc.wantFound)
		}
	}
}

func TestConditionsEqual(t *testing.T) {
	t.Parallel()
	a, b := condAt("A", fleet.ConditionTrue, "Ra"), condAt("B", fleet.ConditionFalse, "Rb")
	with := func(f func(*fleet.Condition)) fleet.Condition {
		c := b
		f(&c)
		return c
	}
	tests := []struct {
		name  string
		x, y  fleet.Conditions
		equal bool
	}{
		{"both empty", nil, fleet.Conditions{}, true},
		{"same", fleet.Conditions{a, b}, fleet.Conditions{a, b}, true},
		{"order ignored", fleet.Conditions{a, b}, fleet.Conditions{b, a}, true},
		{"same instant in another zone", fleet.Conditions{a}, fleet.Conditions{{Type: "A", Status: fleet.ConditionTrue, Reason: "Ra",
			Message: "Ra message", ObservedGeneration: 1, LastTransitionTime: condT0.In(time.FixedZone("X", 7200))}}, true},
		{"one more", fleet.Conditions{a}, fleet.Conditions{a, b}, false},
		{"other type", fleet.Conditions{a}, fleet.Conditions{b}, false},
		{"status differs", fleet.Conditions{a, b}, fleet.Conditions{a, with(func(c *fleet.Condition) { c.Status = fleet.ConditionTrue })}, false},
		{"reason differs", fleet.Conditions{a, b}, fleet.Conditions{a, with(func(c *fleet.Condition) { c.Reason = "Other" })}, false},
		{"message differs", fleet.Conditions{a, b}, fleet.Conditions{a, with(func(c *fleet.Condition) { c.Message = "other" })}, false},
		{"generation differs", fleet.Conditions{a, b}, fleet.Conditions{a, with(func(c *fleet.Condition) { c.ObservedGeneration = 2 })}, false},
		{"time differs", fleet.Conditions{a, b}, fleet.Conditions{a, with(func(c *fleet.Condition) { c.LastTransitionTime = condT1 })}, false},
	}
	for _, tc := range tests {
		if got := tc.x.Equal(tc.y); got != tc.equal {
			t.Errorf("%s: %+v.Equal(%+v) = %v, want %v", tc.name, tc.x, tc.y, got, tc.equal)
		}
		if got := tc.y.Equal(tc.x); got != tc.equal {
			t.Errorf("%s: %+v.Equal(%+v) = %v, want %v", tc.name, tc.y, tc.x, got, tc.equal)
		}
	}
}
