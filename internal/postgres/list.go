package postgres

import (
	"encoding/json"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// listSpec is what a list endpoint may filter and order by.
type listSpec struct {
	// search maps searchable API fields to trusted columns.
	search SearchSchema
	// orderBy maps orderable API fields to trusted columns.
	orderBy map[string]string
	// tiebreak is appended to every ordering, so pages are stable.
	tiebreak string
	// defaultOrder is used when the caller gives none.
	defaultOrder string
}

// list reads one page of rows of query (already scoped to what the caller
// may see), filtered by q.Search and ordered by q.OrderBy, and the total. A
// page past the total is not read.
func list[T any](query *gorm.DB, spec listSpec, q fleet.ListQuery, page, size int) ([]T, int, error) {
	query, _, order, err := searched(query, spec, q)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	if err := query.Session(&gorm.Session{}).Count(&total).Error; err != nil {
		return nil, 0, err
	}
	if int64((page-1)*size) >= total {
		return nil, int(total), nil
	}
	rows, err := find[T](paged(query, spec, order, page, size), size)
	return rows, int(total), err
}

// searched is query filtered by the caller's search, with the search parsed
// and the caller's order (spec's default when none), without its tiebreak.
func searched(query *gorm.DB, spec listSpec, q fleet.ListQuery) (*gorm.DB, fleet.SearchExpr, string, error) {
	expr, conds, err := searchConditions(spec, q)
	if err != nil {
		return nil, nil, "", err
	}
	order, err := listOrder(spec, q)
	if err != nil {
		return nil, nil, "", err
	}
	return conds.apply(query), expr, order, nil
}

// condition is one SQL condition with its arguments.
type condition struct {
	sql  string
	args []any
}

// conditions are ANDed together.
type conditions []condition

func (cs conditions) apply(query *gorm.DB) *gorm.DB {
	for _, c := range cs {
		query = query.Where(c.sql, c.args...)
	}
	return query
}

// searchConditions parses the caller's search and translates it into the
// conditions that filter by it: its required label equalities as
// containment (containment), the rest as written.
func searchConditions(spec listSpec, q fleet.ListQuery) (fleet.SearchExpr, conditions, error) {
	expr, err := fleet.ParseSearch(q.Search)
	if err != nil || expr == nil {
		return nil, nil, err
	}
	// Built whole first, so that a bad search is refused as it would be.
	where, args, err := BuildSearch(expr, spec.search)
	if err != nil {
		return nil, nil, err
	}
	rest, hints := containment(expr, spec.search)
	if len(hints) > 0 {
		if where, args, err = BuildSearch(rest, spec.search); err != nil {
			return nil, nil, err
		}
	}
	if where == "" {
		return expr, hints, nil
	}
	return expr, append(conditions{{sql: where, args: args}}, hints...), nil
}

// listOrder is the caller's order, spec's default when none, without the
// tiebreak.
func listOrder(spec listSpec, q fleet.ListQuery) (string, error) {
	order, err := ParseOrderBy(q.OrderBy, spec.orderBy)
	if err != nil || order != "" {
		return order, err
	}
	return spec.defaultOrder, nil
}

// paged is page of query in order, then spec's tiebreak.
func paged(query *gorm.DB, spec listSpec, order string, page, size int) *gorm.DB {
	return query.Order(order + ", " + spec.tiebreak).Offset((page - 1) * size).Limit(size)
}

// containment splits the search into the `labels.k = 'v'` it requires (each
// a predicate joined to the rest by AND only), written as `labels @> {k: v}`,
// and the rest of the search (nil when nothing is left). The search's own
// `(labels ->> k) = v` cannot use the GIN index on labels; containment can.
// Labels hold string values only (the API's types and the ingest say so), for
// which the two are equivalent, so the result is the same. The predicate is
// replaced, not joined by the hint: PostgreSQL estimates containment from the
// column's statistics, but multiplied the two as if they were independent,
// underestimated the matching rows and chose a slower join
// (docs/performance.md). Under OR or NOT the
// predicate stays as it is: `NOT labels @> {k: v}` also matches a row without
// the key, which `NOT (labels ->> k) = v` does not.
func containment(expr fleet.SearchExpr, schema SearchSchema) (fleet.SearchExpr, conditions) {
	switch e := expr.(type) {
	case fleet.SearchAnd:
		left, leftHints := containment(e.Left, schema)
		right, rightHints := containment(e.Right, schema)
		hints := append(leftHints, rightHints...)
		switch {
		case left == nil:
			return right, hints
		case right == nil:
			return left, hints
		}
		return fleet.SearchAnd{Left: left, Right: right}, hints
	case fleet.SearchPredicate:
		field, ok := schema[e.Field]
		if !ok || field.Type != FieldLabels || e.Op != fleet.OpEq || e.Key == "" ||
			len(e.Values) != 1 || e.Values[0].Kind != fleet.ValueString {
			return expr, nil
		}
		doc, err := json.Marshal(map[string]string{e.Key: e.Values[0].Text})
		if err != nil {
			return expr, nil
		}
		return nil, conditions{{sql: field.Column + " @> ?::jsonb", args: []any{string(doc)}}}
	}
	return expr, nil
}
