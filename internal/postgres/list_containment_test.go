package postgres

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestContainmentReplacesOnlyRequiredLabelEqualities checks which label
// predicates a search is read with as containment (`labels @> {k: v}`), and
// that what is left is the rest of the search: only equalities the search
// requires, never under OR or NOT, and only on label fields.
func TestContainmentReplacesOnlyRequiredLabelEqualities(t *testing.T) {
	t.Parallel()
	schema := SearchSchema{"labels": {Column: "mc.labels", Type: FieldLabels}, "name": {Column: "mc.name", Type: FieldText}}
	cases := []struct {
		search    string
		wantRest  string
		wantHints []string
	}{
		{"labels.env = 'prod'", "", []string{`{"env":"prod"}`}},
		{"labels.env = 'prod' and name = 'a'", "mc.name = ?", []string{`{"env":"prod"}`}},
		{"name = 'a' and (labels.env = 'prod' and labels.team = 'a\"b')", "mc.name = ?", []string{`{"env":"prod"}`, `{"team":"a\"b"}`}},
		{"labels.env = 'prod' or name = 'a'", "((mc.labels ->> ?) = ? OR mc.name = ?)", nil},
		{"not labels.env = 'prod'", "NOT ((mc.labels ->> ?) = ?)", nil},
		{"labels.env != 'prod'", "(mc.labels ->> ?) <> ?", nil},
		{"labels.env in ('prod')", "(mc.labels ->> ?) IN (?)", nil},
	}
	for _, tc := range cases {
		expr, err := fleet.ParseSearch(tc.search)
		if err != nil {
			t.Fatalf("ParseSearch(%q): %v", tc.search, err)
		}
		rest, hints := containment(expr, schema)
		where, _, err := BuildSearch(rest, schema)
		var got []string
		for _, h := range hints {
			if h.sql != "mc.labels @> ?::jsonb" {
				t.Errorf("%q: hint %q; want mc.labels @> ?::jsonb", tc.search, h.sql)
			}
			got = append(got, h.args[0].(string))
		}
		if err != nil || where != tc.wantRest || len(got) != len(tc.wantHints) {
			t.Errorf("%q: rest %q (%v), hints %q; want rest %q, hints %q", tc.search, where, err, got, tc.wantRest, tc.wantHints)
			continue
		}
		for i := range got {
			if got[i] != tc.wantHints[i] {
				t.Errorf("%q: hints %q; want %q", tc.search, got, tc.wantHints)
			}
		}
	}
}
