package fleet_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// render is the tree of expr as a string, "" for no filter.
func render(expr fleet.SearchExpr) string {
	if expr == nil {
		return ""
	}
	return expr.String()
}

func TestParseSearch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    string
		want string
	}{
		{"", ""},
		{" \t\r\n ", ""},
		{"name = 'a'", "(= name 'a')"},
		{"name = 'a' and region in ('x','y') and labels.env = 'prod'",
			"(and (and (= name 'a') (in region 'x' 'y')) (= labels.env 'prod'))"},
		{"name like 'prod-%' or (zone = 'eu' and created_at > '2026-01-01T00:00:00Z')",
			"(or (like name 'prod-%') (and (= zone 'eu') (> created_at '2026-01-01T00:00:00Z')))"},
		{"a = 1 or b = 2 and c = 3", "(or (= a 1) (and (= b 2) (= c 3)))"},
		{"a = 1 and b = 2 or c = 3", "(or (and (= a 1) (= b 2)) (= c 3))"},
		{"(a = 1 or b = 2) and c = 3", "(and (or (= a 1) (= b 2)) (= c 3))"},
		{"a = 1 or b = 2 or c = 3", "(or (or (= a 1) (= b 2)) (= c 3))"},
		{"not a = 1 and b = 2", "(and (not (= a 1)) (= b 2))"},
		{"not (a = 1 and b = 2)", "(not (and (= a 1) (= b 2)))"},
		{"not not a = 1", "(not (not (= a 1)))"},
		{"((a = 1))", "(= a 1)"},
		{"name = 'it''s'", "(= name 'it''s')"},
		{"name = ''''", "(= name '''')"},
		{"name = ''", "(= name '')"},
		{"name = '( and )'", "(= name '( and )')"},
		{"name = 'héllo wörld ✓'", "(= name 'héllo wörld ✓')"},
		{"name LIKE 'p%' OR name Ilike '%x' AnD name NOT like 'y' oR name not ILIKE 'z'",
			"(or (or (like name 'p%') (and (ilike name '%x') (not like name 'y'))) (not ilike name 'z'))"},
		{"zone is null and zone IS NOT NULL", "(and (is null zone) (is not null zone))"},
		{"region not in ('eu') and region IN ('us', 'ap')", "(and (not in region 'eu') (in region 'us' 'ap'))"},
		{"labels.app.kubernetes.io/name = 'x'", "(= labels.app.kubernetes.io/name 'x')"},
		{"labels.example.com/tier-1 != 'gold'", "(!= labels.example.com/tier-1 'gold')"},
		{"labels.env is not null", "(is not null labels.env)"},
		{"a <> 1 and a <= 2 and a >= 3 and a < 4 and a > 5",
			"(and (and (and (and (!= a 1) (<= a 2)) (>= a 3)) (< a 4)) (> a 5))"},
		{"capacity >= -10 and capacity < 3.25 and capacity != -0.5", "(and (and (>= capacity -10) (< capacity 3.25)) (!= capacity -0.5))"},
		{"enabled = TRUE or enabled = false", "(or (= enabled true) (= enabled false))"},
		{"a in (1, -2.5, 'x', true)", "(in a 1 -2.5 'x' true)"},
		{"name='a'and(b=1)", "(and (= name 'a') (= b 1))"},
		{"\tname\n=\r\n'a'  ", "(= name 'a')"},
		{"_x1 = 0", "(= _x1 0)"},
	}
	for _, tt := range tests {
		got, err := fleet.ParseSearch(tt.q)
		if err != nil {
			t.Errorf("ParseSearch(%q) error = %v, want %s", tt.q, err, tt.want)
			continue
		}
		if render(got) != tt.want {
			t.Errorf("ParseSearch(%q) = %s, want %s", tt.q, render(got), tt.want)
		}
	}
}

func TestParseSearchValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    string
		want fleet.SearchPredicate
	}{
		{"name = 'it''s'", fleet.SearchPredicate{Field: "name", Op: fleet.OpEq, Pos: 1,
			Values: []fleet.SearchValue{{Kind: fleet.ValueString, Text: "it's", Pos: 8}}}},
		{"  labels.a.b/c <> 'é'", fleet.SearchPredicate{Field: "labels", Key: "a.b/c", Op: fleet.OpNe, Pos: 3,
			Values: []fleet.SearchValue{{Kind: fleet.ValueString, Text: "é", Pos: 19}}}},
		{"c in (-1.5,TRUE, 'x')", fleet.SearchPredicate{Field: "c", Op: fleet.OpIn, Pos: 1,
			Values: []fleet.SearchValue{{fleet.ValueNumber, "-1.5", 7}, {fleet.ValueBool, "true", 12}, {fleet.ValueString, "x", 18}}}},
		{"c is not null", fleet.SearchPredicate{Field: "c", Op: fleet.OpIsNotNull, Pos: 1}},
	}
	for _, tt := range tests {
		got, err := fleet.ParseSearch(tt.q)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSearch(%q) = %#v, %v, want %#v", tt.q, got, err, tt.want)
		}
	}
}

// TestParseSearchAtLimits parses queries exactly at each limit.
func TestParseSearchAtLimits(t *testing.T) {
	t.Parallel()
	tests := []string{
		strings.Repeat("a = 1 and ", fleet.MaxSearchPredicates-1) + "a = 1",
		strings.Repeat("(", fleet.MaxSearchDepth) + "a = 1" + strings.Repeat(")", fleet.MaxSearchDepth),
		strings.Repeat("not ", fleet.MaxSearchDepth) + "a = 1",
		"a in (" + strings.Repeat("1,", fleet.MaxSearchInValues-1) + "1)",
		"name = '" + strings.Repeat("x", fleet.MaxSearchLength-9) + "'",
		"labels." + strings.Repeat("k", fleet.MaxLabelKeyLength) + " = 'v'",
	}
	for _, q := range tests {
		if _, err := fleet.ParseSearch(q); err != nil {
			t.Errorf("ParseSearch(%.40q...) = %v, want no error", q, err)
		}
	}
}

func TestParseSearchErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q   string
		pos int
		msg string
	}{
		{"name = 'abc", 8, "unterminated string"},
		{"name = 'a\x00'", 10, "a string may not contain NUL"},
		{"name = and", 8, "expected a value after '=', found 'and'"},
		{"name = ", 8, "expected a value after '=', found end of input"},
		{"name = null", 8, "expected a value after '=', found 'null'; write 'is null' to match a missing value"},
		{"name == 'a'", 6, "unknown operator '=='"},
		{"name =< 'a'", 6, "unknown operator '=<'"},
		{"name", 5, "expected an operator after a name, found end of input"},
		{"name 'a'", 6, "expected an operator after a name, found a string"},
		{"name = 'a' and", 15, "expected a field, '(' or 'not' after 'and', found end of input"},
		{"name = 'a' or or b = 1", 15, "expected a field, '(' or 'not' after 'or', found 'or'"},
		{"and name = 'a'", 1, "expected a field, '(' or 'not', found 'and'"},
		{"not", 4, "expected a field, '(' or 'not' after 'not', found end of input"},
		{"()", 2, "expected a field, '(' or 'not' after '(', found ')'"},
		{"(name = 'a'", 12, "expected ')' to close the '(' at position 1, found end of input"},
		{"((a = 1) or (b = 2)", 20, "expected ')' to close the '(' at position 1, found end of input"},
		{"name = 'a')", 11, "unexpected ')'"},
		{"name = 'a' region = 'b'", 12, "unexpected a name; expected 'and', 'or' or end of input"},
		{"region in ()", 12, "empty 'in' list; give at least one value"},
		{"region in ('x',)", 16, "expected a value after ',', found ')'"},
		{"region in ('x' 'y')", 16, "expected ',' or ')' after a string, found a string"},
		{"region in 'x'", 11, "expected '(' after 'in', found a string"},
		{"region in ('x'", 15, "expected ',' or ')' after a string, found end of input"},
		{"name like 5", 11, "expected a string after 'like', found a number"},
		{"name not = 'a'", 10, "expected 'in', 'like' or 'ilike' after 'not', found '='"},
		{"name is 'a'", 9, "expected 'null' or 'not null' after 'is', found a string"},
		{"name is not 'a'", 13, "expected 'null' after 'not', found a string"},
		{"name = 1e5", 8, "invalid number"},
		{"name = 1.", 8, "invalid number"},
		{"name = -", 8, "invalid number"},
		{"Name = 'a'", 1, "invalid field name;"},
		{"in = 'a'", 1, "expected a field, '(' or 'not', found 'in'"},
		{"labels. = 'a'", 8, "expected a label key after 'labels.'"},
		{"name = 'a' # x", 12, "unexpected character '#'"},
		{"name = 'é' and x ~ 1", 18, "unexpected character '~'"},
		{"name = '\xff'", 9, "invalid UTF-8"},
		{"name == 'unterminated", 6, "unknown operator '=='"},
		{strings.Repeat("(", 17) + "a = 1" + strings.Repeat(")", 17), 17, "nesting deeper than 16 levels"},
		{strings.Repeat("not ", 17) + "a = 1", 65, "nesting deeper than 16 levels"},
		{strings.Repeat("a = 1 and ", 64) + "a = 1", 641, "more than 64 predicates"},
		{"a in (" + strings.Repeat("1,", 256) + "1)", 519, "more than 256 values in an 'in' list"},
		{"name = '" + strings.Repeat("x", 4090) + "'", 4097, "the query is longer than 4096 bytes"},
		{"labels." + strings.Repeat("k", 318) + " = 'v'", 8, "label key longer than 317 characters"},
	}
	for _, tt := range tests {
		got, err := fleet.ParseSearch(tt.q)
		var se *fleet.SearchError
		if !errors.As(err, &se) {
			t.Errorf("ParseSearch(%.60q) = %v, %v, want a *SearchError", tt.q, render(got), err)
			continue
		}
		want := fmt.Sprintf("position %d: %s", tt.pos, tt.msg)
		if se.Pos != tt.pos || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSearch(%.60q) error = %q, want %q", tt.q, err, want)
		}
		if code := fleet.ErrorCodeOf(err); code != fleet.CodeBadSearch || got != nil {
			t.Errorf("ParseSearch(%.60q) = %v, code %d, want nil, code %d", tt.q, got, code, fleet.CodeBadSearch)
		}
	}
}

func TestSearchErrorf(t *testing.T) {
	t.Parallel()
	err := fleet.SearchErrorf(12, "unknown field '%s'", "foo")
	var se *fleet.SearchError
	if !errors.As(err, &se) || se.Pos != 12 || se.Msg != "unknown field 'foo'" {
		t.Errorf("SearchErrorf(12, ...) wraps %#v, want &SearchError{Pos: 12, Msg: \"unknown field 'foo'\"}", se)
	}
	if got, want := fleet.ErrorMessageOf(err), "position 12: unknown field 'foo'"; got != want {
		t.Errorf("ErrorMessageOf(SearchErrorf(12, ...)) = %q, want %q", got, want)
	}
}
