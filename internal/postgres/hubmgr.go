package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// ListHubLiveness returns every live hub with its heartbeat freshness.
func (s *HubStore) ListHubLiveness(ctx context.Context) ([]fleet.HubLiveness, error) {
	var rows []hubRow
	err := s.db.Gorm.WithContext(ctx).Raw(`SELECT h.*, `+heartbeatFreshSQL+` AS heartbeat_fresh
FROM hubs h WHERE h.deleted_at IS NULL ORDER BY h.id`, s.cfg.HeartbeatTimeout.Seconds()).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("ListHubLiveness(): %w", err)
	}
	out := make([]fleet.HubLiveness, len(rows))
	for i, r := range rows {
		out[i] = fleet.HubLiveness{Hub: r.toHub(), HeartbeatFresh: r.HeartbeatFresh}
	}
	return out, nil
}

// SetHubReadyCondition sets a hub's Ready condition under the row lock, so a
// concurrent heartbeat's conditions are kept.
func (s *HubStore) SetHubReadyCondition(ctx context.Context, id string, ready fleet.Condition) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := findHub(tx, id, true)
		if err != nil {
			return err
		}
		conds := row.Conditions.Set(ready, ready.LastTransitionTime)
		return tx.Exec(`UPDATE hubs SET conditions = ?, updated_at = now() WHERE id = ?`, jsonText(conds), id).Error
	})
	return wrapErr("SetHubReadyCondition", id, err)
}

// idempotencyPurgeBatch is how many expired keys one purge statement deletes.
const idempotencyPurgeBatch = 5000

// PurgeIdempotencyKeys deletes the keys older than their time to live and
// returns how many, a bounded batch per statement, oldest first, so that a
// bulk onboarding's keys expiring together make no statement that grows with
// them.
func (s *HubStore) PurgeIdempotencyKeys(ctx context.Context) (int, error) {
	total := 0
	for {
		res := s.db.Gorm.WithContext(ctx).Exec(`DELETE FROM idempotency_keys WHERE (org_id, key) IN (
	SELECT org_id, key FROM idempotency_keys WHERE created_at < now() - make_interval(secs => ?) ORDER BY created_at LIMIT ?)`,
			s.cfg.IdempotencyKeyTTL.Seconds(), idempotencyPurgeBatch)
		if res.Error != nil {
			return total, wrapErr("PurgeIdempotencyKeys", "", res.Error)
		}
		total += int(res.RowsAffected)
		if res.RowsAffected < idempotencyPurgeBatch {
			return total, nil
		}
	}
}

// RequeueUnplaced wakes the unplaced registrations waiting (not due now,
// and not claimed by a pass) in every zone where a ready hub has room: at
// most limit a zone, the soonest due first, those never scheduled last. It
// returns how many. Each zone's waiting rows are read through the index
// registrations_unplaced_waiting (migration202612072200AckWakeCursor) from
// the first due after now, so the statement reads what it wakes, not the
// unplaced rows already due, however many a bulk onboarding queued; the
// rows past the limit are woken by hub_mgr's next pass, or when they fall
// due. The rows are locked in id order, as the passes lock theirs, and one
// a pass holds is left to it (SKIP LOCKED). A zone whose only room is on a
// hub that belongs to an organisation wakes that organisation's rows only.
func (s *HubStore) RequeueUnplaced(ctx context.Context, modes []fleet.DeliveryMode, limit int) (int, error) {
	var n int64
	err := s.transact(ctx, func(tx *gorm.DB) error {
		// The hubs with room; its parameters are the modes and the heartbeat timeout.
		room := `h.deleted_at IS NULL AND NOT h.cordoned AND h.placed_count < h.capacity AND h.delivery_mode IN ? AND ` + hubReadySQL
		modes, timeout := modeStrings(modes), s.cfg.HeartbeatTimeout.Seconds()
		res := tx.Exec(`WITH zones AS (SELECT DISTINCT h.zone FROM hubs h WHERE `+room+`),
waiting AS (SELECT w.id FROM zones z CROSS JOIN LATERAL (SELECT r.id FROM registrations r
	WHERE r.zone = z.zone AND r.hub_id IS NULL AND r.deleted_at IS NULL AND r.deletion_requested_at IS NULL
	  AND `+unplacedWaitingSQL+` > now() AND (r.claimed_until IS NULL OR r.claimed_until < now())
	ORDER BY `+unplacedWaitingSQL+` LIMIT ?) w),
locked AS (SELECT r.id FROM registrations r WHERE r.id IN (SELECT id FROM waiting)
	AND r.hub_id IS NULL AND r.deleted_at IS NULL AND r.deletion_requested_at IS NULL
	AND EXISTS (SELECT 1 FROM hubs h WHERE h.zone = r.zone AND (h.owner_org_id IS NULL OR h.owner_org_id = r.org_id) AND `+room+`)
	ORDER BY r.id FOR UPDATE SKIP LOCKED)
UPDATE registrations r SET next_attempt_at = now() FROM locked WHERE r.id = locked.id`,
			modes, timeout, limit, modes, timeout)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		n = res.RowsAffected
		return wakeAfterCommit(tx, ChannelRegistrations, "requeue")
	})
	return int(n), wrapErr("RequeueUnplaced", "", err)
}

// unplacedWaitingSQL is when an unplaced registration r is due, a row never
// scheduled last: the expression registrations_unplaced_waiting indexes.
const unplacedWaitingSQL = `coalesce(r.next_attempt_at, 'infinity'::timestamptz)`

// QueueDepthBound is the most due registrations Stats counts: a backlog
// larger than this is reported as this many, split between the kinds as the
// longest due of them are, so the count costs the same however large the
// backlog grows.
const QueueDepthBound = 10_000

// Stats reads the fleet's gauges: the queue's depth (at most
// QueueDepthBound due registrations) and the live registrations per phase,
// summed from registration_phase_counts. Neither reads more rows as the
// fleet grows.
func (s *HubStore) Stats(ctx context.Context) (fleet.FleetStats, error) {
	stats := fleet.FleetStats{QueueDepth: map[fleet.WorkKind]int{}, Phases: map[fleet.Phase]int{}}
	err := s.db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var depth struct{ Provision, Deprovision int }
		// The due rows in the queue's own order (registrations_work), the
		// longest due first.
		if err := tx.Raw(`SELECT count(*) FILTER (WHERE deletion_requested_at IS NULL) AS provision,
	count(*) FILTER (WHERE deletion_requested_at IS NOT NULL) AS deprovision
FROM (SELECT deletion_requested_at FROM registrations WHERE deleted_at IS NULL AND next_attempt_at <= now()
	ORDER BY next_attempt_at LIMIT ?) AS due`, QueueDepthBound).Scan(&depth).Error; err != nil {
			return err
		}
		stats.QueueDepth[fleet.WorkProvision], stats.QueueDepth[fleet.WorkDeprovision] = depth.Provision, depth.Deprovision
		var phases []struct {
			Phase string
			N     int
		}
		if err := tx.Raw(`SELECT phase, sum(live) AS n FROM registration_phase_counts GROUP BY phase HAVING sum(live) <> 0`).
			Scan(&phases).Error; err != nil {
			return err
		}
		for _, p := range phases {
			stats.Phases[fleet.Phase(p.Phase)] = p.N
		}
		return nil
	})
	return stats, wrapErr("Stats", "", err)
}

// MarkInventoryStale flags a hub's inventory stale until its next full resync.
func (s *HubStore) MarkInventoryStale(ctx context.Context, hubID string) error {
	err := s.db.Gorm.WithContext(ctx).Exec(`UPDATE hubs SET inventory_stale = true, resync_requested = true
WHERE id = ? AND NOT inventory_stale`, hubID).Error
	return wrapErr("MarkInventoryStale", hubID, err)
}
