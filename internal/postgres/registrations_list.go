package postgres

import (
	"context"
	"fmt"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

var registrationList = listSpec{
	search: SearchSchema{
		"id": {Column: "r.id", Type: FieldText}, "name": {Column: "r.name", Type: FieldText},
		"display_name": {Column: "r.display_name", Type: FieldText}, "zone": {Column: "r.zone", Type: FieldText},
		"region": {Column: "r.region", Type: FieldText}, "product": {Column: "r.product", Type: FieldText},
		"phase": {Column: "r.phase", Type: FieldText}, "hub_id": {Column: "r.hub_id", Type: FieldText},
		"hub_name": {Column: "h.name", Type: FieldText}, "labels": {Column: "r.labels", Type: FieldLabels},
		"created_at": {Column: "r.created_at", Type: FieldTimestamp}, "updated_at": {Column: "r.updated_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{
		"name": "r.name", "display_name": "r.display_name", "zone": "r.zone", "region": "r.region",
		"product": "r.product", "phase": "r.phase", "created_at": "r.created_at", "updated_at": "r.updated_at",
	},
	tiebreak:     "r.id",
	defaultOrder: "r.created_at",
}

// ListRegistrations returns a page of org's live registrations.
func (s *Store) ListRegistrations(ctx context.Context, org string, q fleet.ListQuery) ([]fleet.Registration, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	query := s.inServedZones(registrations(s.db.Gorm.WithContext(ctx)), "r.zone").Where("r.org_id = ? AND r.deleted_at IS NULL", org)
	rows, total, err := list[registrationRow](query, registrationList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListRegistrations(%s): %w", org, err)
	}
	regs := make([]fleet.Registration, len(rows))
	for i, r := range rows {
		regs[i] = r.toRegistration()
	}
	return regs, total, nil
}
