package postgres

import (
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
// may see), filtered by q.Search and ordered by q.OrderBy, and the total.
func list[T any](query *gorm.DB, spec listSpec, q fleet.ListQuery, page, size int) ([]T, int, error) {
	expr, err := fleet.ParseSearch(q.Search)
	if err != nil {
		return nil, 0, err
	}
	if expr != nil {
		where, args, err := BuildSearch(expr, spec.search)
		if err != nil {
			return nil, 0, err
		}
		query = query.Where(where, args...)
	}
	order, err := ParseOrderBy(q.OrderBy, spec.orderBy)
	if err != nil {
		return nil, 0, err
	}
	if order == "" {
		order = spec.defaultOrder
	}
	var total int64
	if err := query.Session(&gorm.Session{}).Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var rows []T
	err = query.Order(order + ", " + spec.tiebreak).Offset((page - 1) * size).Limit(size).Find(&rows).Error
	return rows, int(total), err
}
