package postgres

import (
	"context"
	"fmt"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// PhaseDriftForTest lists the registrations, live or deleted, whose stored
// phase is not the one fleet.DerivePhase gives for their stored facts. It
// derives on its own, not through writeFacts, so it checks that helper too.
func PhaseDriftForTest(ctx context.Context, db *DB) ([]string, error) {
	var rows []registrationRow
	if err := db.Gorm.WithContext(ctx).Raw(`SELECT * FROM registrations ORDER BY name`).Scan(&rows).Error; err != nil {
		return nil, err
	}
	var drift []string
	for _, r := range rows {
		want := fleet.DerivePhase(fleet.MergeHubReportedConditions(r.Conditions, r.HubConditions), r.DeletionRequestedAt != nil, r.DeletedAt != nil)
		if r.Phase != string(want) {
			drift = append(drift, fmt.Sprintf("%s: phase %q, derived %q", r.Name, r.Phase, want))
		}
	}
	return drift, nil
}
