package rest

import (
	"strings"
	"testing"
)

func TestScanJSONDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw   string
		limit int
		want  bool
	}{
		{`{}`, 1, false},
		{`{"a":{}}`, 1, true},
		{`[[1],[2],{"a":[3]}]`, 3, false},
		{`[[1],[2],{"a":[3]}]`, 2, true},
		{`{"a":"[[[[[[{{{{"}`, 1, false},
		{`{"a":"\"[[[[","b":"\\"}`, 1, false},
		{`{"a":"\\\"{{{{"}`, 1, false},
		{`{"a":"\\"}`, 1, false},
		{`{"a":"x\\","b":[[]]}`, 2, true},
		{strings.Repeat("[", 101) + strings.Repeat("]", 101), 100, true},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), 100, false},
		{strings.Repeat(`{"x":`, 9_999) + "{}" + strings.Repeat("}", 9_999), 100, true},
		{`not json`, 1, false},
		{``, 1, false},
	}
	for _, tc := range tests {
		if got, _ := scanJSON([]byte(tc.raw), tc.limit); got != tc.want {
			t.Errorf("scanJSON(%.40q, %d) = %v, want %v", tc.raw, tc.limit, got, tc.want)
		}
	}
}
