package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// resolvePolicy places a policy on the hubs it reaches now and moves the
// desired sets that change: of the hubs it joins and leaves and, when
// changed says its content changed (or it was deleted), of every hub that
// holds it. A policy reaches an agent hub of its zone holding at least one
// live cluster of its organisation that its selector matches. The caller
// holds the policy's row lock (or has just inserted it).
func (s *PolicyStore) resolvePolicy(tx *gorm.DB, id string, changed bool) (moved []string, err error) {
	var p struct {
		OrgID    string
		Zone     string
		Selector selectorJSON `gorm:"serializer:json"`
		Deleted  bool
	}
	if err := tx.Raw(`SELECT org_id, zone, selector, deleted_at IS NOT NULL AS deleted FROM policies WHERE id = ?`, id).Take(&p).Error; err != nil {
		return nil, fmt.Errorf("resolvePolicy(%s): %w", id, err)
	}
	var want []string
	if !p.Deleted {
		// The organisation's clusters are read from its hubs and its
		// registrations (inventory_org.go): asked of every hub of the zone,
		// whether it held a visible matching cluster cost a walk of each
		// hub's clusters (docs/performance.md).
		// On a hub it owns, the first matching cluster is enough.
		match, args := selectorSQL("mc.labels", p.Selector.selector())
		conds := conditions{{sql: match, args: args},
			{sql: "h.delivery_mode = ? AND h.zone = ?", args: []any{string(fleet.DeliveryAgent), p.Zone}}}
		db := tx.Session(&gorm.Session{NewDB: true})
		err := db.Table("((?) UNION ALL (?)) AS mc", s.inventory.orgOwned(db, p.OrgID, conds, "mc.created_at", 1), s.inventory.orgShared(db, p.OrgID, conds, "", 0)).
			Distinct("mc.hub_id").Order("mc.hub_id").Pluck("mc.hub_id", &want).Error
		if err != nil {
			return nil, fmt.Errorf("resolvePolicy(%s): %w", id, err)
		}
	}
	var held []string
	if err := tx.Raw(`SELECT hub_id FROM policy_hubs WHERE policy_id = ? ORDER BY hub_id`, id).Scan(&held).Error; err != nil {
		return nil, fmt.Errorf("resolvePolicy(%s): %w", id, err)
	}
	affected := map[string]bool{}
	for _, h := range want {
		if changed || !slices.Contains(held, h) {
			affected[h] = true
		}
	}
	for _, h := range held {
		if changed || !slices.Contains(want, h) {
			affected[h] = true
		}
	}
	// A hub the policy leaves takes its compliance with it: the hub's later
	// reports of the policy are not recorded (policy_compliance_sync).
	if err := tx.Exec(`WITH left_hubs AS (
		DELETE FROM policy_hubs WHERE policy_id = ? AND NOT (hub_id = ANY(string_to_array(?, ','))) RETURNING hub_id)
	DELETE FROM policy_compliance WHERE policy_id = ? AND hub_id IN (SELECT hub_id FROM left_hubs)`,
		id, strings.Join(want, ","), id).Error; err != nil {
		return nil, fmt.Errorf("resolvePolicy(%s): %w", id, err)
	}
	if len(want) > 0 {
		if err := tx.Exec(`INSERT INTO policy_hubs (policy_id, hub_id) SELECT ?, unnest(string_to_array(?, ',')) ON CONFLICT DO NOTHING`,
			id, strings.Join(want, ",")).Error; err != nil {
			return nil, fmt.Errorf("resolvePolicy(%s): %w", id, err)
		}
	}
	if err := tx.Exec(`UPDATE policies SET resolved_at = now() WHERE id = ?`, id).Error; err != nil {
		return nil, fmt.Errorf("resolvePolicy(%s): %w", id, err)
	}
	// In id order, so two writers bumping the same hubs cannot deadlock.
	moved = slices.Sorted(maps.Keys(affected))
	for _, h := range moved {
		if _, _, err := bumpRevision(tx, h); err != nil {
			return nil, fmt.Errorf("resolvePolicy(%s): hub %s: %w", id, h, err)
		}
	}
	return moved, nil
}

// ResolvePolicies places every live policy of the served zones on the hubs
// it reaches now (the inventory moves under the selectors), one policy per
// transaction, and returns how many desired sets moved. A policy another
// replica is resolving is skipped.
func (s *PolicyStore) ResolvePolicies(ctx context.Context) (int, error) {
	var ids []string
	if err := s.inServedZones(s.db.Gorm.WithContext(ctx).Table("policies").Where("deleted_at IS NULL"), "zone").
		Order("id").Pluck("id", &ids).Error; err != nil {
		return 0, fmt.Errorf("ResolvePolicies: %w", err)
	}
	moved := 0
	for _, id := range ids {
		err := s.transact(ctx, func(tx *gorm.DB) error {
			var locked []string
			if err := tx.Raw(`SELECT id FROM policies WHERE id = ? AND deleted_at IS NULL FOR UPDATE SKIP LOCKED`, id).Scan(&locked).Error; err != nil || len(locked) == 0 {
				return err
			}
			hubs, err := s.resolvePolicy(tx, id, false)
			moved += len(hubs)
			return err
		})
		if err != nil {
			return moved, fmt.Errorf("ResolvePolicies: %w", err)
		}
	}
	return moved, nil
}

// selectorSQL renders a label selector over the jsonb labels column col,
// with Kubernetes' meaning: NotIn and DoesNotExist hold for a missing key.
// Match labels become one containment, which the labels' GIN index serves.
func selectorSQL(col string, sel fleet.LabelSelector) (string, []any) {
	terms, args := []string{"true"}, []any{}
	if len(sel.MatchLabels) > 0 {
		terms = append(terms, col+" @> ?::jsonb")
		args = append(args, jsonText(sel.MatchLabels))
	}
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case fleet.SelectorIn:
			terms = append(terms, "("+col+" ->> ?) IN ?")
			args = append(args, e.Key, e.Values)
		case fleet.SelectorNotIn:
			terms = append(terms, "(("+col+" ->> ?) IS NULL OR ("+col+" ->> ?) NOT IN ?)")
			args = append(args, e.Key, e.Key, e.Values)
		case fleet.SelectorExists:
			terms = append(terms, "("+col+" ->> ?) IS NOT NULL")
			args = append(args, e.Key)
		case fleet.SelectorDoesNotExist:
			terms = append(terms, "("+col+" ->> ?) IS NULL")
			args = append(args, e.Key)
		default:
			// Validated away; an unknown operator matches nothing.
			terms = append(terms, "false")
		}
	}
	return "(" + strings.Join(terms, " AND ") + ")", args
}
