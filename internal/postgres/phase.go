package postgres

import (
	"maps"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"gorm.io/gorm"
)

// phaseFacts are the columns of a registration its phase is derived from:
// its own conditions, the conditions its hub reports, and its deletion state.
type phaseFacts struct {
	conditions, hubConditions  fleet.Conditions
	deletionRequested, deleted bool
}

// factsOf returns the phase facts a row read under lock holds.
func factsOf(r registrationRow) phaseFacts {
	return phaseFacts{conditions: r.Conditions, hubConditions: r.HubConditions,
		deletionRequested: r.DeletionRequestedAt != nil, deleted: r.DeletedAt != nil}
}

// phase is the only place the phase column's value is computed.
func (f phaseFacts) phase() string {
	return string(fleet.DerivePhase(fleet.MergeHubReportedConditions(f.conditions, f.hubConditions), f.deletionRequested, f.deleted))
}

// writeFacts is the only UPDATE that sets a registration's phase: it stores
// the facts and the phase derived from them together, with the other columns
// of set, on the row id the caller has locked. Deletion is only ever asked
// for or done, never undone, so a false flag leaves its column alone.
func writeFacts(tx *gorm.DB, id string, f phaseFacts, set map[string]any) error {
	cols := maps.Clone(set)
	if cols == nil {
		cols = map[string]any{}
	}
	cols["conditions"], cols["hub_conditions"], cols["phase"] = jsonText(f.conditions), jsonText(f.hubConditions), f.phase()
	if f.deletionRequested {
		cols["deletion_requested_at"] = gorm.Expr("coalesce(deletion_requested_at, now())")
	}
	if f.deleted {
		cols["deleted_at"] = gorm.Expr("coalesce(deleted_at, now())")
	}
	return tx.Model(&registrationRow{}).Where("id = ?", id).Updates(cols).Error
}
