package fleet

import (
	"encoding/json"
	"fmt"
)

// StringMapJSON is a JSON object of strings as the inventory stores it (a
// jsonb column: labels, claims, capacity, allocatable). Reads carry it to the
// API's answer undecoded: decoding every row's maps and encoding them again
// was most of the CPU a page of clusters cost (docs/performance.md).
// Code that needs the values calls Map.
type StringMapJSON json.RawMessage

// Map decodes the document; an absent or null one is an empty map.
func (j StringMapJSON) Map() (map[string]string, error) {
	m := map[string]string{}
	if isNullJSON(j) {
		return m, nil
	}
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, fmt.Errorf("StringMapJSON.Map: %w", err)
	}
	return m, nil
}

// JSON is the document as stored; an absent or null one is {}.
func (j StringMapJSON) JSON() []byte {
	if isNullJSON(j) {
		return []byte("{}")
	}
	return j
}

// MarshalJSON writes JSON.
func (j StringMapJSON) MarshalJSON() ([]byte, error) { return j.JSON(), nil }

// ConditionsJSON is a JSON array of ClusterCondition as the inventory stores
// it, carried undecoded like StringMapJSON.
type ConditionsJSON json.RawMessage

// Conditions decodes the document; an absent or null one is no condition.
func (j ConditionsJSON) Conditions() ([]ClusterCondition, error) {
	out := []ClusterCondition{}
	if isNullJSON(j) {
		return out, nil
	}
	if err := json.Unmarshal(j, &out); err != nil {
		return nil, fmt.Errorf("ConditionsJSON.Conditions: %w", err)
	}
	return out, nil
}

// JSON is the document as stored; an absent or null one is [].
func (j ConditionsJSON) JSON() []byte {
	if isNullJSON(j) {
		return []byte("[]")
	}
	return j
}

// MarshalJSON writes JSON.
func (j ConditionsJSON) MarshalJSON() ([]byte, error) { return j.JSON(), nil }

func isNullJSON(b []byte) bool {
	return len(b) == 0 || string(b) == "null"
}
