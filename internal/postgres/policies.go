package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// policyRow is a live policy with the number of hubs it is placed on.
type policyRow struct {
	ID         string
	OrgID      string
	Zone       string
	Name       string
	Body       storedPolicyBody
	Selector   selectorJSON `gorm:"serializer:json"`
	Generation int64
	CreatedBy  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Hubs       int
	// DeliveryFailures is filled by policies(): policy_hubs' failures.
	DeliveryFailures []fleet.PolicyDeliveryFailure `gorm:"serializer:json;->"`
}

func (r policyRow) toPolicy() fleet.Policy {
	return fleet.Policy{ID: r.ID, OrgID: r.OrgID, Zone: r.Zone, Name: r.Name, Body: policyBodyOrStub(r.Body, r.Name), Selector: r.Selector.selector(),
		Generation: r.Generation, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Hubs: r.Hubs,
		DeliveryFailures: r.DeliveryFailures}
}

// selectorJSON is a label selector as stored, in Kubernetes' spelling.
type selectorJSON struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values,omitempty"`
	} `json:"matchExpressions,omitempty"`
}

func (s selectorJSON) selector() fleet.LabelSelector {
	out := fleet.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, fleet.LabelSelectorRequirement{Key: e.Key, Operator: fleet.SelectorOperator(e.Operator), Values: e.Values})
	}
	return out
}

// policies selects live policies with their hub counts.
func policies(db *gorm.DB) *gorm.DB {
	return db.Table("policies AS p").Select(`p.*, (SELECT count(*) FROM policy_hubs ph WHERE ph.policy_id = p.id) AS hubs,
	(SELECT coalesce(jsonb_agg(ph.delivery_failure || jsonb_build_object('hub_id', ph.hub_id) ORDER BY ph.hub_id), '[]')
		FROM policy_hubs ph WHERE ph.policy_id = p.id AND ph.delivery_failure IS NOT NULL) AS delivery_failures`).
		Where("p.deleted_at IS NULL")
}

var policyList = listSpec{
	search: SearchSchema{
		"id": {Column: "p.id", Type: FieldText}, "name": {Column: "p.name", Type: FieldText},
		"zone": {Column: "p.zone", Type: FieldText}, "created_by": {Column: "p.created_by", Type: FieldText},
		"created_at": {Column: "p.created_at", Type: FieldTimestamp}, "updated_at": {Column: "p.updated_at", Type: FieldTimestamp},
	},
	orderBy:      map[string]string{"name": "p.name", "created_at": "p.created_at", "updated_at": "p.updated_at"},
	tiebreak:     "p.id",
	defaultOrder: "p.created_at",
}

// CreatePolicy stores a policy whose body the PolicyValidator accepted and
// places it on the hubs its selector reaches, in one transaction.
func (s *PolicyStore) CreatePolicy(ctx context.Context, caller fleet.Identity, create fleet.PolicyCreate) (fleet.Policy, error) {
	if caller.OrgID == "" {
		return fleet.Policy{}, fleet.Errorf(fleet.CodeOrgNotAllowed, "the token carries no organisation")
	}
	if create.Zone == "" {
		create.Zone = s.cfg.DefaultZone
	}
	if create.Zone == "" {
		return fleet.Policy{}, fleet.Errorf(fleet.CodeValidation, "zone is required")
	}
	if err := create.Validate(); err != nil {
		return fleet.Policy{}, err
	}
	if err := s.cfg.Zones.Check("policy", create.Zone); err != nil {
		return fleet.Policy{}, err
	}
	body, err := fleet.NormalizePolicyBody(create.Body)
	if err != nil {
		return fleet.Policy{}, err
	}
	id, name := newID(), fleet.PolicyName(body)
	err = s.transact(ctx, func(tx *gorm.DB) error {
		err := tx.Exec(`INSERT INTO policies (id, org_id, zone, name, body, selector, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, caller.OrgID, create.Zone, name, jsonText(body), jsonText(storedSelector(create.Selector)), caller.Username).Error
		if err != nil {
			return policyWriteError(err)
		}
		_, err = s.resolvePolicy(tx, id, true)
		return err
	})
	if err != nil {
		return fleet.Policy{}, fmt.Errorf("CreatePolicy(%s/%s): %w", caller.OrgID, name, err)
	}
	return s.FindPolicy(ctx, caller.OrgID, id)
}

// ListPolicies returns a page of the organisation's live policies.
func (s *PolicyStore) ListPolicies(ctx context.Context, org string, q fleet.ListQuery) ([]fleet.Policy, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	query := s.inServedZones(policies(s.db.Gorm.WithContext(ctx)).Where("p.org_id = ?", org), "p.zone")
	rows, total, err := list[policyRow](query, policyList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListPolicies(%s): %w", org, err)
	}
	out := make([]fleet.Policy, len(rows))
	for i, r := range rows {
		out[i] = r.toPolicy()
	}
	return out, total, nil
}

// FindPolicy returns one of the organisation's live policies.
func (s *PolicyStore) FindPolicy(ctx context.Context, org, id string) (fleet.Policy, error) {
	var row policyRow
	err := s.inServedZones(policies(s.db.Gorm.WithContext(ctx)).Where("p.org_id = ? AND p.id = ?", org, id), "p.zone").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.Policy{}, notFound("policy", id)
	}
	if err != nil {
		return fleet.Policy{}, fmt.Errorf("FindPolicy(%s/%s): %w", org, id, err)
	}
	return row.toPolicy(), nil
}

// UpdatePolicy replaces a policy's body and selector under If-Match, and
// moves the desired sets of every hub that held or now holds it.
func (s *PolicyStore) UpdatePolicy(ctx context.Context, permit fleet.Permit, org, id string, match *int64, update fleet.PolicyUpdate) (fleet.Policy, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockPolicy(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, row.authzResource()); err != nil {
			return err
		}
		if err := update.Selector.Validate(); err != nil {
			return err
		}
		body, err := fleet.NormalizePolicyBody(update.Body)
		if err != nil {
			return err
		}
		name := fleet.PolicyName(body)
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		err = tx.Exec(`UPDATE policies SET name = ?, body = ?, selector = ?, generation = generation + 1, updated_at = now() WHERE id = ?`,
			name, jsonText(body), jsonText(storedSelector(update.Selector)), id).Error
		if err != nil {
			return policyWriteError(err)
		}
		_, err = s.resolvePolicy(tx, id, true)
		return err
	})
	if err != nil {
		return fleet.Policy{}, fmt.Errorf("UpdatePolicy(%s/%s): %w", org, id, err)
	}
	return s.FindPolicy(ctx, org, id)
}

// authzResource is the policy as the Authorizer sees it.
func (r policyRow) authzResource() fleet.AuthzResource {
	return fleet.AuthzResource{Kind: "policy", ID: r.ID, OrgID: r.OrgID, CreatedBy: r.CreatedBy}
}

// DeletePolicy removes a policy under If-Match: it leaves every hub's
// desired set, and its compliance is dropped. The row stays as a tombstone,
// so the name is free again.
func (s *PolicyStore) DeletePolicy(ctx context.Context, permit fleet.Permit, org, id string, match *int64) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockPolicy(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, row.authzResource()); err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE policies SET deleted_at = now(), updated_at = now() WHERE id = ?`, id).Error; err != nil {
			return err
		}
		if err := tx.Exec(`DELETE FROM policy_compliance WHERE policy_id = ?`, id).Error; err != nil {
			return err
		}
		_, err = s.resolvePolicy(tx, id, false)
		return err
	})
	if err != nil {
		return fmt.Errorf("DeletePolicy(%s/%s): %w", org, id, err)
	}
	return nil
}

// lockPolicy locks one of the organisation's live policies in tx.
func (s *PolicyStore) lockPolicy(tx *gorm.DB, org, id string) (policyRow, error) {
	var row policyRow
	zones, zoneArgs := s.servedZonesSQL("zone")
	err := tx.Raw(`SELECT * FROM policies WHERE id = ? AND org_id = ? AND deleted_at IS NULL AND `+zones+` FOR UPDATE`,
		append([]any{id, org}, zoneArgs...)...).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("policy", id)
	}
	return row, err
}

// storedSelector renders a selector for the selector column.
func storedSelector(s fleet.LabelSelector) map[string]any { return s.Object() }

// policyWriteError translates a write of a policy that broke the
// one-live-name-per-organisation index into CodeNameTaken.
func policyWriteError(err error) error {
	if c, ok := uniqueViolation(err); ok && c == "policies_org_name" {
		return fleet.Errorf(fleet.CodeNameTaken, "a policy of this name already exists in this organisation")
	}
	return err
}
