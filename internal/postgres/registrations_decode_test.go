package postgres

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// registrationDocuments are labels and conditions as PostgreSQL writes them
// from jsonb, and documents the fast decoders must hand to encoding/json.
var registrationDocuments = []string{
	`{}`, `[]`, `null`, ` {"env": "prod", "team": "a"} `, `{"a":"b","c":"d"}`,
	`{"k": "caf\u00e9 \"quoted\" \\ back"}`, `{"k": "é日本"}`, `{"k": 1}`, `{"k": null}`, `{"k": {"x": "y"}}`,
	`{"k": "a", "k": "b"}`, `{"k": "a",}`, `{"k" "a"}`, `{"k": "a"} x`, `{"k": "a"`, `["a"]`, `"s"`, ``,
	`[{"type": "Placed", "reason": "Placed", "status": "True", "message": "placed on hub-1", "observed_generation": 3, "last_transition_time": "2026-01-10T08:00:01Z"}]`,
	`[{"type": "A", "status": "False", "reason": "R", "observed_generation": 0, "last_transition_time": "2026-01-10T08:00:01.123456789+02:00"}, {"type": "B", "status": "Unknown", "reason": "S", "observed_generation": -2, "last_transition_time": "2026-01-10T08:00:01Z"}]`,
	`[{"type": "A", "message": "line\nbreak", "observed_generation": 1}]`, `[{"type": "A", "observed_generation": 1.5}]`,
	`[{"type": "A", "observed_generation": 01}]`, `[{"type": "A", "observed_generation": -0}]`, `[{"type": "A", "observed_generation": 99999999999999999999}]`,
	`[{"type": "A", "last_transition_time": "2026-13-10T08:00:01Z"}]`, `[{"type": "A", "last_transition_time": "2026-01-10 08:00:01Z"}]`,
	`[{"type": "A", "extra": "x"}]`, `[{"type": "A"} {"type": "B"}]`, `[{"type": "A"},]`, `[null]`, `[{"type": null}]`, `{"type": "A"}`,
}

// TestRegistrationDocumentsDecodeAsEncodingJSON checks decodeLabels and
// decodeConditions against json.Unmarshal: the same value, or an error both.
func TestRegistrationDocumentsDecodeAsEncodingJSON(t *testing.T) {
	for _, doc := range registrationDocuments {
		var wantLabels map[string]string
		wantErr := json.Unmarshal([]byte(doc), &wantLabels)
		labels, err := decodeLabels([]byte(doc))
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(labels, wantLabels)) {
			t.Errorf("decodeLabels(%s) = %#v, %v; want %#v, %v", doc, labels, err, wantLabels, wantErr)
		}
		var wantConds fleet.Conditions
		wantErr = json.Unmarshal([]byte(doc), &wantConds)
		conds, err := decodeConditions([]byte(doc))
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(conds, wantConds)) {
			t.Errorf("decodeConditions(%s) = %#v, %v; want %#v, %v", doc, conds, err, wantConds, wantErr)
		}
	}
}

// FuzzRegistrationDocuments is TestRegistrationDocumentsDecodeAsEncodingJSON
// on any document.
func FuzzRegistrationDocuments(f *testing.F) {
	for _, doc := range registrationDocuments {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var wantLabels map[string]string
		wantErr := json.Unmarshal([]byte(doc), &wantLabels)
		if labels, err := decodeLabels([]byte(doc)); (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(labels, wantLabels)) {
			t.Errorf("decodeLabels(%q) = %#v, %v; want %#v, %v", doc, labels, err, wantLabels, wantErr)
		}
		var wantConds fleet.Conditions
		wantErr = json.Unmarshal([]byte(doc), &wantConds)
		if conds, err := decodeConditions([]byte(doc)); (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(conds, wantConds)) {
			t.Errorf("decodeConditions(%q) = %#v, %v; want %#v, %v", doc, conds, err, wantConds, wantErr)
		}
	})
}
