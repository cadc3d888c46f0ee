package postgres

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// FieldType says which values and operators a searchable field accepts and how
// its values reach SQL.
type FieldType int

// The field types, each for columns of one PostgreSQL type: FieldText for text
// (or varchar), FieldTimestamp for timestamptz (or timestamp), FieldInteger for
// integer (so values are 32-bit), FieldBool for boolean, and FieldLabels for a
// jsonb object of string values, searched by key as "labels.<key>".
const (
	FieldText FieldType = iota + 1
	FieldTimestamp
	FieldInteger
	FieldBool
	FieldLabels
)

// String names t in messages.
func (t FieldType) String() string {
	switch t {
	case FieldText:
		return "text"
	case FieldTimestamp:
		return "timestamp"
	case FieldInteger:
		return "integer"
	case FieldBool:
		return "boolean"
	case FieldLabels:
		return "labels"
	}
	return fmt.Sprintf("FieldType(%d)", int(t))
}

// SearchField is one searchable field. Column is a trusted SQL expression
// written in code, such as "r.name"; it is copied into the SQL as is.
type SearchField struct {
	Column string
	Type   FieldType
}

// SearchSchema maps the field names of the search language to their columns:
// the whitelist of what a query may touch.
type SearchSchema map[string]SearchField

// BuildSearch translates expr into a SQL boolean expression over schema's
// columns, with a GORM "?" placeholder for every value and label key, and the
// arguments in placeholder order. A nil expr gives "" (no WHERE clause).
//
// Every binary node is parenthesised, so SQL precedence is the tree's. The
// comparisons keep SQL semantics: a NULL field matches no comparison, not even
// "!=" (which is "<>"); a query says "or x is null" to include them. On labels,
// "labels.k = 'v'" compares (labels ->> 'k'), and "labels.k is null" means the
// key is absent (NOT jsonb_exists(labels, 'k')). Timestamps are RFC 3339 or
// YYYY-MM-DD (midnight UTC) strings. Errors: CodeBadSearch, wrapping a
// *fleet.SearchError that gives the position.
func BuildSearch(expr fleet.SearchExpr, schema SearchSchema) (string, []any, error) {
	if expr == nil {
		return "", nil, nil
	}
	b := &searchBuilder{schema: schema}
	if err := b.build(expr); err != nil {
		return "", nil, err
	}
	return b.sql.String(), b.args, nil
}

// searchBuilder accumulates the SQL and the arguments of one expression.
type searchBuilder struct {
	schema SearchSchema
	sql    strings.Builder
	args   []any
}

func (b *searchBuilder) build(expr fleet.SearchExpr) error {
	switch e := expr.(type) {
	case fleet.SearchAnd:
		return b.binary(e.Left, " AND ", e.Right)
	case fleet.SearchOr:
		return b.binary(e.Left, " OR ", e.Right)
	case fleet.SearchNot:
		b.sql.WriteString("NOT (")
		if err := b.build(e.X); err != nil {
			return err
		}
		b.sql.WriteString(")")
		return nil
	case fleet.SearchPredicate:
		return b.predicate(e)
	}
	return fmt.Errorf("BuildSearch: unexpected node %T", expr)
}

func (b *searchBuilder) binary(left fleet.SearchExpr, op string, right fleet.SearchExpr) error {
	b.sql.WriteString("(")
	if err := b.build(left); err != nil {
		return err
	}
	b.sql.WriteString(op)
	if err := b.build(right); err != nil {
		return err
	}
	b.sql.WriteString(")")
	return nil
}

func (b *searchBuilder) predicate(p fleet.SearchPredicate) error {
	field, err := b.lookup(p)
	if err != nil {
		return err
	}
	args := make([]any, 0, len(p.Values))
	for _, v := range p.Values {
		arg, err := searchArg(p.Field, field.Type, v)
		if err == nil && isLikeOp(p.Op) {
			err = checkLikePattern(v)
		}
		if err != nil {
			return err
		}
		args = append(args, arg)
	}
	column := field.Column
	if field.Type == FieldLabels {
		b.args = append(b.args, p.Key)
		switch p.Op {
		case fleet.OpIsNull:
			b.sql.WriteString("NOT jsonb_exists(" + column + ", ?)")
			return nil
		case fleet.OpIsNotNull:
			b.sql.WriteString("jsonb_exists(" + column + ", ?)")
			return nil
		}
		column = "(" + column + " ->> ?)"
	}
	b.sql.WriteString(column + " " + sqlOperator(p.Op))
	if p.Op == fleet.OpIn || p.Op == fleet.OpNotIn {
		b.sql.WriteString(" (" + strings.Repeat("?, ", len(args)-1) + "?)")
	} else if len(args) == 1 {
		b.sql.WriteString(" ?")
	}
	b.args = append(b.args, args...)
	return nil
}

// lookup returns p's field after checking that p's key and operator suit it.
func (b *searchBuilder) lookup(p fleet.SearchPredicate) (SearchField, error) {
	field, ok := b.schema[p.Field]
	switch {
	case !ok:
		return field, fleet.SearchErrorf(p.Pos, "unknown field; searchable fields: %s",
			strings.Join(slices.Sorted(maps.Keys(b.schema)), ", "))
	case field.Type == FieldLabels && p.Key == "":
		return field, fleet.SearchErrorf(p.Pos, "field '%s' needs a key, as in '%s.env'", p.Field, p.Field)
	case field.Type != FieldLabels && p.Key != "":
		return field, fleet.SearchErrorf(p.Pos, "field '%s' has no keys; write '%s' alone", p.Field, p.Field)
	case !operatorApplies(field.Type, p.Op):
		return field, fleet.SearchErrorf(p.Pos, "operator '%s' does not apply to %s field '%s'", p.Op, field.Type, p.Field)
	}
	return field, nil
}

// operatorApplies reports whether op suits a field of type t: pattern matching
// is for text, ordering is not for booleans.
func operatorApplies(t FieldType, op fleet.SearchOp) bool {
	switch op {
	case fleet.OpLike, fleet.OpNotLike, fleet.OpILike, fleet.OpNotILike:
		return t == FieldText || t == FieldLabels
	case fleet.OpLt, fleet.OpLe, fleet.OpGt, fleet.OpGe:
		return t != FieldBool
	}
	return true
}

func isLikeOp(op fleet.SearchOp) bool {
	return op == fleet.OpLike || op == fleet.OpNotLike || op == fleet.OpILike || op == fleet.OpNotILike
}

// checkLikePattern rejects the one pattern PostgreSQL refuses: one ending in
// an escape character, a '\' with nothing to escape.
func checkLikePattern(v fleet.SearchValue) error {
	if trailing := len(v.Text) - len(strings.TrimRight(v.Text, `\`)); trailing%2 == 1 {
		return fleet.SearchErrorf(v.Pos, `a like pattern may not end with an escaping '\'; write '\\' to match a backslash`)
	}
	return nil
}

// sqlOperator returns the SQL spelling of op.
func sqlOperator(op fleet.SearchOp) string {
	if op == fleet.OpNe {
		return "<>"
	}
	return strings.ToUpper(string(op))
}

// searchArg checks v against a field of type t and returns the argument that
// stands for it.
func searchArg(field string, t FieldType, v fleet.SearchValue) (any, error) {
	var (
		arg any
		err error
		ok  = true
	)
	switch {
	case (t == FieldText || t == FieldLabels) && v.Kind == fleet.ValueString:
		arg = v.Text
	case t == FieldBool && v.Kind == fleet.ValueBool:
		arg = v.Text == "true"
	case t == FieldInteger && v.Kind == fleet.ValueNumber:
		arg, err = strconv.ParseInt(v.Text, 10, 32)
	case t == FieldTimestamp && v.Kind == fleet.ValueString:
		arg, err = parseSearchTime(v.Text)
	default:
		ok = false
	}
	if !ok || err != nil {
		return nil, fleet.SearchErrorf(v.Pos, "field '%s' wants %s, found %s", field, searchTypeWants(t), v.Kind.Describe())
	}
	return arg, nil
}

// searchTypeWants says which literal a field of type t wants.
func searchTypeWants(t FieldType) string {
	switch t {
	case FieldInteger:
		return "a 32-bit integer"
	case FieldBool:
		return "true or false"
	case FieldTimestamp:
		return "a quoted RFC 3339 timestamp (2026-01-02T15:04:05Z) or date (2026-01-02)"
	}
	return "a quoted string"
}

// parseSearchTime parses an RFC 3339 timestamp, or a date as midnight UTC.
func parseSearchTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, s)
}

// ParseOrderBy translates s, such as "name asc, created_at desc", into an ORDER
// BY list (without the keywords) over the columns of allowed, which maps the
// API's field names to trusted SQL columns. Directions are asc (the default)
// or desc, in any case. A blank s gives "". The caller appends its tiebreaker.
// Errors: CodeBadOrderBy.
func ParseOrderBy(s string, allowed map[string]string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	var terms []string
	seen := map[string]bool{}
	for i, term := range strings.Split(s, ",") {
		words := strings.Fields(term)
		if len(words) == 0 || len(words) > 2 {
			return "", fleet.Errorf(fleet.CodeBadOrderBy, "invalid orderBy term %d: write a field, optionally followed by asc or desc", i+1)
		}
		column, ok := allowed[words[0]]
		if !ok {
			return "", fleet.Errorf(fleet.CodeBadOrderBy, "unknown orderBy field in term %d; allowed fields: %s", i+1, strings.Join(slices.Sorted(maps.Keys(allowed)), ", "))
		}
		if seen[words[0]] {
			return "", fleet.Errorf(fleet.CodeBadOrderBy, "orderBy names '%s' more than once", words[0])
		}
		seen[words[0]] = true
		direction := "ASC"
		if len(words) == 2 {
			if direction = strings.ToUpper(words[1]); direction != "ASC" && direction != "DESC" {
				return "", fleet.Errorf(fleet.CodeBadOrderBy, "invalid orderBy direction for '%s'; use asc or desc", words[0])
			}
		}
		terms = append(terms, column+" "+direction)
	}
	return strings.Join(terms, ", "), nil
}
