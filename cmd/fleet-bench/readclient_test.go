package main

import "testing"

// TestLeadingString checks that the feed's cursor is read from the start of
// an answer, whatever precedes it, and that an answer without one gives none.
func TestLeadingString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body   string
		want   string
		wantOK bool
	}{
		{`{"cursor":"c1","items":[{"cluster":{"labels":{"a": "b"}}}],"kind":"ManagedClusterChangeList"}`, "c1", true},
		{`{"kind":"ManagedClusterChangeList","size":2,"nested":{"cursor":"no"},"cursor":"c2"}`, "c2", true},
		{`{"kind":"ManagedClusterChangeList","items":[]}`, "", false},
		{`{"cursor":7}`, "", false},
		{`[{"cursor":"c3"}]`, "", false},
		{`not json`, "", false},
	}
	for _, tc := range cases {
		got, ok := leadingString([]byte(tc.body), "cursor")
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("leadingString(%s) = %q, %v; want %q, %v", tc.body, got, ok, tc.want, tc.wantOK)
		}
	}
}
