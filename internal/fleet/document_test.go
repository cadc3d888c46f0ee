package fleet_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestStoredDocuments checks that a stored JSON document is written as it is,
// that an absent or null one is written as the empty value of its type, and
// that it decodes to the values it holds.
func TestStoredDocuments(t *testing.T) {
	t.Parallel()
	type answer struct {
		Labels     fleet.StringMapJSON  `json:"labels"`
		Conditions fleet.ConditionsJSON `json:"conditions"`
	}
	at := time.Date(2026, 1, 10, 8, 0, 0, 0, time.UTC)
	stored := answer{Labels: fleet.StringMapJSON(`{"env": "prod", "team": "a\"b"}`),
		Conditions: fleet.ConditionsJSON(`[{"type": "ManagedClusterJoined", "status": "True", "last_transition_time": "2026-01-10T08:00:00Z"}]`)}
	cases := []struct {
		name           string
		in             answer
		wantJSON       string
		wantLabels     map[string]string
		wantConditions []fleet.ClusterCondition
	}{
		{"stored", stored,
			`{"labels":{"env":"prod","team":"a\"b"},"conditions":[{"type":"ManagedClusterJoined","status":"True","last_transition_time":"2026-01-10T08:00:00Z"}]}`,
			map[string]string{"env": "prod", "team": "a\"b"},
			[]fleet.ClusterCondition{{Type: "ManagedClusterJoined", Status: "True", LastTransitionTime: &at}}},
		{"absent", answer{}, `{"labels":{},"conditions":[]}`, map[string]string{}, []fleet.ClusterCondition{}},
		{"null", answer{Labels: fleet.StringMapJSON("null"), Conditions: fleet.ConditionsJSON("null")},
			`{"labels":{},"conditions":[]}`, map[string]string{}, []fleet.ClusterCondition{}},
	}
	for _, tc := range cases {
		got, err := json.Marshal(tc.in)
		if err != nil || string(got) != tc.wantJSON {
			t.Errorf("%s: json.Marshal() = %s, %v; want %s", tc.name, got, err, tc.wantJSON)
		}
		labels, err := tc.in.Labels.Map()
		if err != nil || !reflect.DeepEqual(labels, tc.wantLabels) {
			t.Errorf("%s: Labels.Map() = %v, %v; want %v", tc.name, labels, err, tc.wantLabels)
		}
		conditions, err := tc.in.Conditions.Conditions()
		if err != nil || !reflect.DeepEqual(conditions, tc.wantConditions) {
			t.Errorf("%s: Conditions.Conditions() = %+v, %v; want %+v", tc.name, conditions, err, tc.wantConditions)
		}
	}
	if _, err := fleet.StringMapJSON(`{"env": 1}`).Map(); err == nil {
		t.Errorf(`StringMapJSON({"env": 1}).Map() = nil error; want one`)
	}
}
