package postgres

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// storedFailure is a delivery failure as kept in registrations and
// policy_hubs: the hub, its reason and message, the revision of that hub
// whose pass found it, and when it began (it does not move while the
// failure stays the same).
type storedFailure struct {
	HubID    string    `json:"hub_id"`
	Reason   string    `json:"reason"`
	Message  string    `json:"message"`
	Revision int64     `json:"revision"`
	Since    time.Time `json:"since"`
}

// failureRow is an entry of a hub with its failure as stored.
type failureRow struct {
	ID      string
	Failure *string
}

// recordDeliveryFailures makes the hub's stored delivery failures those the
// agent reported for revision: a listed registration or policy gets its
// failure, every other entry of the hub loses its own. Registrations whose
// failure changed are woken, so their Delivered condition follows at once.
func (s *HubStore) recordDeliveryFailures(tx *gorm.DB, hubID string, revision int64, failures []fleet.DeliveryFailure) error {
	regs, pols := map[string]fleet.DeliveryFailure{}, map[string]fleet.DeliveryFailure{}
	for _, f := range failures {
		switch {
		case f.RegistrationID != "":
			regs[f.RegistrationID] = fleet.SanitizeFailure(f)
		case f.PolicyID != "":
			pols[f.PolicyID] = fleet.SanitizeFailure(f)
		}
	}
	now := s.clock.Now().UTC()
	var rows []failureRow
	if err := tx.Raw(`SELECT id, delivery_failure::text AS failure FROM registrations
WHERE hub_id = ? AND deleted_at IS NULL AND (delivery_failure IS NOT NULL OR id IN ?) ORDER BY id`, hubID, slices.Collect(maps.Keys(regs))).Scan(&rows).Error; err != nil {
		return fmt.Errorf("registration failures: %w", err)
	}
	woken := 0
	// In id order (the SELECT's), as the reconcilers' batches lock registrations.
	for _, r := range rows {
		next, changed := nextFailure(r.Failure, regs, r.ID, hubID, revision, now)
		if !changed {
			continue
		}
		if err := tx.Exec(`UPDATE registrations SET delivery_failure = ?::jsonb, next_attempt_at = now() WHERE id = ?`, next, r.ID).Error; err != nil {
			return fmt.Errorf("registration %s failure: %w", r.ID, err)
		}
		woken++
	}
	rows = nil
	if err := tx.Raw(`SELECT policy_id AS id, delivery_failure::text AS failure FROM policy_hubs
WHERE hub_id = ? AND (delivery_failure IS NOT NULL OR policy_id IN ?)`, hubID, slices.Collect(maps.Keys(pols))).Scan(&rows).Error; err != nil {
		return fmt.Errorf("policy failures: %w", err)
	}
	for _, r := range rows {
		next, changed := nextFailure(r.Failure, pols, r.ID, hubID, revision, now)
		if !changed {
			continue
		}
		if err := tx.Exec(`UPDATE policy_hubs SET delivery_failure = ?::jsonb WHERE policy_id = ? AND hub_id = ?`, next, r.ID, hubID).Error; err != nil {
			return fmt.Errorf("policy %s failure: %w", r.ID, err)
		}
	}
	if woken > 0 {
		return wakeAfterCommit(tx, ChannelRegistrations, hubID)
	}
	return nil
}

// nextFailure returns what an entry's stored failure becomes (nil: none) and
// whether that differs from have. The same failure found again at a newer
// revision keeps the time it began.
func nextFailure(have *string, reported map[string]fleet.DeliveryFailure, id, hubID string, revision int64, now time.Time) (*string, bool) {
	f, failed := reported[id]
	var old *storedFailure
	if have != nil {
		old = &storedFailure{}
		if err := json.Unmarshal([]byte(*have), old); err != nil {
			old = &storedFailure{}
		}
	}
	switch {
	case !failed && old == nil:
		return nil, false
	case !failed:
		return nil, true
	case old != nil && old.Reason == f.Reason && old.Message == f.Message:
		if old.Revision == revision && old.HubID == hubID {
			return nil, false
		}
		now = old.Since // the same failure, found again at a newer revision
	}
	next := jsonText(storedFailure{HubID: hubID, Reason: f.Reason, Message: f.Message, Revision: revision, Since: now})
	return &next, true
}

// decodeFailure decodes the delivery failure stored for registration id
// (raw: its delivery_failure), nil when there is none.
func decodeFailure(id string, raw *string) (*storedFailure, error) {
	if raw == nil {
		return nil, nil
	}
	var f storedFailure
	if err := json.Unmarshal([]byte(*raw), &f); err != nil {
		return nil, fmt.Errorf("registration %s failure: %w", id, err)
	}
	return &f, nil
}
