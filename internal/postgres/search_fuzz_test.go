package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// FuzzBuildSearch checks that no query reaches the database unparameterised:
// whatever the input, parsing and translating do not panic, errors are
// CodeBadSearch with a position inside the query, and a translation is made
// only of the schema's columns, keywords, operators and placeholders, with one
// argument of a known type per placeholder.
func FuzzBuildSearch(f *testing.F) {
	for _, tt := range buildSearchTests() {
		f.Add(tt.q)
	}
	for _, tt := range buildSearchErrorTests() {
		f.Add(tt.q)
	}
	for _, tt := range searchRowsTests() {
		f.Add(tt.q)
	}
	for _, q := range []string{
		"name = 'abc", "name == 'a'", "name = 'a' and", "(name = 'a'", "name = 'a')", "region in ()",
		"NOT not (capacity <> -1 OR labels.a.b/c-d NOT LIKE 'x''y')", "name = '\xff'", "name = 'a\x00'",
		"labels. = 'x'", "capacity = 1e5", "name is not null and region is null", "((((name = 'é'))))",
	} {
		f.Add(q)
	}
	schema := sampleSchema()
	f.Fuzz(func(t *testing.T, q string) {
		sql, args, err := buildSearch(q)
		if err != nil {
			checkSearchError(t, q, err)
			return
		}
		if err := checkSearchSQL(sql, schema); err != nil {
			t.Fatalf("BuildSearch(%q) = %q: %v", q, sql, err)
		}
		if n := strings.Count(sql, "?"); n != len(args) {
			t.Fatalf("BuildSearch(%q) = %q with %d placeholders, %d args", q, sql, n, len(args))
		}
		for _, arg := range args {
			if err := checkSearchArg(arg); err != nil {
				t.Fatalf("BuildSearch(%q) args %v: %v", q, args, err)
			}
		}
	})
}

// checkSearchError checks that err is a client's error with a position in q.
func checkSearchError(t *testing.T, q string, err error) {
	t.Helper()
	var se *fleet.SearchError
	if !errors.As(err, &se) || fleet.ErrorCodeOf(err) != fleet.CodeBadSearch {
		t.Fatalf("BuildSearch(%q) error = %v, want a CodeBadSearch *SearchError", q, err)
	}
	if se.Pos < 1 || se.Pos > utf8.RuneCountInString(q)+1 {
		t.Fatalf("BuildSearch(%q) error = %v, position outside 1..%d", q, err, utf8.RuneCountInString(q)+1)
	}
}

// checkSearchSQL consumes sql token by token, accepting only the schema's
// columns, the keywords and operators BuildSearch writes, placeholders and
// balanced parentheses; anything left over is an error.
func checkSearchSQL(sql string, schema postgres.SearchSchema) error {
	words := []string{"AND", "OR", "NOT", "IN", "LIKE", "ILIKE", "IS", "NULL"}
	for _, field := range schema {
		words = append(words, field.Column)
	}
	symbols := []string{"jsonb_exists(", "->>", "<>", "<=", ">=", "=", "<", ">", "?", "(", ")", ",", " "}
	depth := 0
	for rest := sql; rest != ""; {
		n := slices.IndexFunc(words, func(w string) bool {
			return strings.HasPrefix(rest, w) && (len(rest) == len(w) || !isSQLWordByte(rest[len(w)]))
		})
		token := ""
		if n >= 0 {
			token = words[n]
		} else if n = slices.IndexFunc(symbols, func(s string) bool { return strings.HasPrefix(rest, s) }); n >= 0 {
			token = symbols[n]
		} else {
			return fmt.Errorf("unexpected SQL at %q", rest)
		}
		depth += strings.Count(token, "(") - strings.Count(token, ")")
		if depth < 0 {
			return fmt.Errorf("unbalanced ')' at %q", rest)
		}
		rest = rest[len(token):]
	}
	if depth != 0 {
		return fmt.Errorf("%d unclosed '('", depth)
	}
	return nil
}

func isSQLWordByte(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkSearchArg checks that arg is of a type BuildSearch gives and that
// PostgreSQL accepts it as text when it is a string.
func checkSearchArg(arg any) error {
	switch a := arg.(type) {
	case string:
		if !utf8.ValidString(a) || strings.ContainsRune(a, 0) {
			return fmt.Errorf("string argument %q is not valid PostgreSQL text", a)
		}
	case int64, bool, time.Time:
	default:
		return fmt.Errorf("argument %#v of unexpected type %T", arg, arg)
	}
	return nil
}

// TestCheckSearchSQL shows the fuzz oracle rejects what it must.
func TestCheckSearchSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql string
		ok  bool
	}{
		{"((t.name = ? AND NOT (t.region IN (?, ?))) OR (t.labels ->> ?) ILIKE ?)", true},
		{"NOT jsonb_exists(t.labels, ?) AND t.capacity IS NOT NULL", true},
		{"t.name = 'x'", false},
		{"t.name = ?; DROP TABLE t", false},
		{"t.nameX = ?", false},
		{"t.name = ? ORDER", false},
		{"INLIKE", false},
		{"(t.name = ?", false},
		{"t.name = ?)", false},
		{"t.name = $1", false},
	}
	for _, tt := range tests {
		if err := checkSearchSQL(tt.sql, sampleSchema()); (err == nil) != tt.ok {
			t.Errorf("checkSearchSQL(%q) = %v, want ok %v", tt.sql, err, tt.ok)
		}
	}
}
