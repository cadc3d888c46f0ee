package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// RecordRegistrationStatus stores the hub's view of the registrations placed
// on it: Joined and Available, and the import material (encrypted). Each row
// is locked, so the derived phase agrees with the reconcilers' writes.
func (s *HubStore) RecordRegistrationStatus(ctx context.Context, hubID, agentIdentity string, items []fleet.RegistrationHubStatus) (int, error) {
	updated := 0
	err := s.transact(ctx, func(tx *gorm.DB) error {
		if _, err := s.agentHub(tx, hubID, agentIdentity, true); err != nil {
			return err
		}
		// In id order, as the reconcilers' batches lock registrations, so
		// the two cannot deadlock; stable, so a repeated item still wins.
		items := slices.Clone(items)
		slices.SortStableFunc(items, func(a, b fleet.RegistrationHubStatus) int { return strings.Compare(a.RegistrationID, b.RegistrationID) })
		for _, item := range items {
			ok, err := s.recordOne(tx, hubID, item)
			if err != nil {
				return err
			}
			if ok {
				updated++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("RecordRegistrationStatus(%s): %w", hubID, err)
	}
	return updated, nil
}

func (s *HubStore) recordOne(tx *gorm.DB, hubID string, item fleet.RegistrationHubStatus) (bool, error) {
	var row registrationRow
	err := tx.Raw(`SELECT * FROM registrations WHERE id = ? AND hub_id = ? AND deleted_at IS NULL FOR UPDATE`, item.RegistrationID, hubID).Scan(&row).Error
	if err != nil || row.ID == "" {
		return false, err
	}
	now := s.clock.Now()
	hubConds := row.HubConditions
	for _, c := range item.Conditions {
		if fleet.HubReportedCondition(c.Type) {
			c.ObservedGeneration = row.Generation
			hubConds = hubConds.Set(c, now)
		}
	}
	facts := factsOf(row)
	facts.hubConditions = hubConds
	updates := map[string]any{}
	if item.ImportManifests != nil {
		sealed, err := s.seal([]byte(*item.ImportManifests), "registrations", "import_material", row.ID)
		if err != nil {
			return false, err
		}
		updates["import_material"], updates["import_material_key_id"] = sealed.Data, sealed.KeyID
	}
	return true, writeFacts(tx, row.ID, facts, updates)
}
