package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// The acknowledgement's wake-up, in batches. An agent's heartbeat records
// the revision its hub applied and nothing more; the registrations that
// revision delivered or withdrew are woken (due now, woken_by_ack, so that
// the queue claims them first: claimTiers) by provisioning_mgr's passes,
// each waking a bounded batch before it claims (Queue.WakeAcknowledged). A
// hub's rows are read in (revision, id) order through the indexes of
// migration202612072200AckWakeCursor, from where the hub's last batch
// stopped: woken_revision (every revision up to it is woken) and, within the
// next revisions, the cursor (wake_cursor_revision, wake_cursor_id), the
// last row woken. So no statement reads or locks more than a batch, however
// many registrations one acknowledgement finished, and a bulk onboarding's
// acknowledgements are worked down a batch a pass, beside the placement of
// what is still unplaced.

// ackWakeHub is a hub whose agent applied revisions not woken yet, with
// where its wake-up stands.
type ackWakeHub struct {
	ID                 string
	WokenRevision      int64
	AppliedRevision    int64
	WakeCursorRevision *int64
	WakeCursorID       *string
}

// ackWakeRow is an index entry of a hub's acknowledged registrations: the
// revision that published or withdrew it, and its id.
type ackWakeRow struct {
	Rev int64
	ID  string
}

// wakeAcknowledged wakes, across the hubs whose agents applied revisions
// not woken yet, at most limit acknowledged registrations: each hub an even
// share, at least one. It returns how many it woke and whether acknowledged
// ones remain (a hub's batch was full, or a hub was left for lack of
// budget or because another replica is waking it).
func (s *HubStore) wakeAcknowledged(ctx context.Context, limit int) (int, bool, error) {
	var hubs []string
	if err := s.db.Gorm.WithContext(ctx).Raw(`SELECT id FROM hubs WHERE applied_revision > woken_revision ORDER BY id`).
		Scan(&hubs).Error; err != nil {
		return 0, false, fmt.Errorf("wakeAcknowledged: %w", err)
	}
	if len(hubs) == 0 || limit < 1 {
		return 0, len(hubs) > 0, nil
	}
	share := max(limit/len(hubs), 1)
	woken, more := 0, false
	for _, h := range hubs {
		if woken >= limit {
			more = true
			break
		}
		n, full, err := s.wakeHubBatch(ctx, h, min(share, limit-woken))
		if err != nil {
			return woken, true, fmt.Errorf("wakeAcknowledged(%s): %w", h, err)
		}
		woken += n
		more = more || full
	}
	return woken, more, nil
}

// wakeHubBatch wakes the next batch of at most n of hub h's acknowledged
// registrations and moves the hub's position past them. full is true when
// the batch was full: more may remain. A hub another replica is waking is
// left to it (full, so that the caller comes back).
//
// The batch's transaction locks no hub row: a publication to the hub, which
// locks it, never waits for the registrations the batch locks, and the
// hub's position moves in a statement of its own after the commit. Two
// batches of one hub are kept apart by a transaction-level advisory lock on
// the hub; the position only moves forward, so a batch that read an older
// one (between another's commit and its move, or after a crash between the
// two) wakes rows twice at worst, which costs them one more pass.
func (s *HubStore) wakeHubBatch(ctx context.Context, hubID string, n int) (int, bool, error) {
	woken, full := 0, false
	var h ackWakeHub
	var move func(db *gorm.DB) error
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var locked bool
		if err := tx.Raw(`SELECT pg_try_advisory_xact_lock(hashtextextended('fleet-manager.ack-wake:' || ?, 0))`, hubID).
			Scan(&locked).Error; err != nil {
			return err
		}
		if !locked {
			full = true
			return nil
		}
		// The position as it is now that no other batch of the hub runs.
		if err := tx.Raw(`SELECT id, woken_revision, applied_revision, wake_cursor_revision, wake_cursor_id FROM hubs WHERE id = ?`, hubID).
			Scan(&h).Error; err != nil {
			return err
		}
		if h.AppliedRevision <= h.WokenRevision {
			return nil
		}
		rows, err := ackWakeCandidates(tx, h, n)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			ids := make([]string, len(rows))
			for i, r := range rows {
				ids[i] = r.ID
			}
			res := tx.Exec(`WITH due AS (SELECT id FROM registrations
	WHERE id IN ? AND deleted_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at > now() OR NOT woken_by_ack)
	ORDER BY id FOR UPDATE)
UPDATE registrations r SET next_attempt_at = least(r.next_attempt_at, now()), woken_by_ack = true FROM due WHERE r.id = due.id`, ids)
			if res.Error != nil {
				return res.Error
			}
			woken = int(res.RowsAffected)
			if woken > 0 {
				if err := wakeAfterCommit(tx, ChannelRegistrations, h.ID); err != nil {
					return err
				}
			}
		}
		if len(rows) < n {
			// Every acknowledged row up to the applied revision is woken.
			move = func(db *gorm.DB) error {
				return db.Exec(`UPDATE hubs SET woken_revision = ?, wake_cursor_revision = NULL, wake_cursor_id = NULL
WHERE id = ? AND woken_revision < ?`, h.AppliedRevision, h.ID, h.AppliedRevision).Error
			}
			return nil
		}
		full = true
		last := rows[len(rows)-1]
		move = func(db *gorm.DB) error {
			return db.Exec(`UPDATE hubs SET woken_revision = greatest(woken_revision, ?), wake_cursor_revision = ?, wake_cursor_id = ?
WHERE id = ? AND (`+ackWakePositionSQL+`) < (?, 0, ?)`, last.Rev-1, last.Rev, last.ID, h.ID, last.Rev, last.ID).Error
		}
		return nil
	})
	if err != nil || move == nil {
		return woken, full, err
	}
	// The hub's row only after the registrations' commit: a publication
	// locks the hub first and its registrations then, so a batch that held
	// its registrations while it waited for the hub would deadlock with it.
	return woken, full, move(s.db.Gorm.WithContext(ctx))
}

// ackWakePositionSQL is where a hub's wake-up stands, comparable with a
// row's (revision, 0, id): past every row up to woken_revision, or past the
// cursor's row when the cursor is above woken_revision.
const ackWakePositionSQL = `CASE WHEN wake_cursor_revision > woken_revision THEN wake_cursor_revision ELSE woken_revision END,
	CASE WHEN wake_cursor_revision > woken_revision THEN 0 ELSE 1 END,
	CASE WHEN wake_cursor_revision > woken_revision THEN wake_cursor_id ELSE '' END`

// ackWakeCandidates reads the next n index entries of hub h's publications
// and withdrawals after its position, up to the applied revision, in
// (revision, id) order: each index gives its first n, and the first n of
// both are the batch. Deregistered rows are read as entries (they hold the
// withdrawals' index) so that the position moves past them, and woken by
// none.
func ackWakeCandidates(tx *gorm.DB, h ackWakeHub, n int) ([]ackWakeRow, error) {
	after := func(col string) (string, []any) {
		if h.WakeCursorRevision != nil && h.WakeCursorID != nil && *h.WakeCursorRevision > h.WokenRevision {
			return "(" + col + ", id) > (?, ?)", []any{*h.WakeCursorRevision, *h.WakeCursorID}
		}
		return col + " > ?", []any{h.WokenRevision}
	}
	pub, pubArgs := after("published_revision")
	wd, wdArgs := after("withdrawn_revision")
	args := append([]any{h.ID}, pubArgs...)
	args = append(args, h.AppliedRevision, n, h.ID)
	args = append(args, wdArgs...)
	args = append(args, h.AppliedRevision, n, n)
	var rows []ackWakeRow
	err := tx.Raw(`SELECT rev, id FROM (
	(SELECT published_revision AS rev, id FROM registrations
		WHERE hub_id = ? AND deleted_at IS NULL AND published_revision IS NOT NULL AND `+pub+` AND published_revision <= ?
		ORDER BY published_revision, id LIMIT ?)
	UNION ALL
	(SELECT withdrawn_revision, id FROM registrations
		WHERE hub_id = ? AND withdrawn_revision IS NOT NULL AND `+wd+` AND withdrawn_revision <= ?
		ORDER BY withdrawn_revision, id LIMIT ?)
) c ORDER BY rev, id LIMIT ?`, args...).Scan(&rows).Error
	return rows, err
}
