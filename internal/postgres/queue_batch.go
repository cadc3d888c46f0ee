package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// placeRow is what placement reads of a claimed registration.
type placeRow struct {
	ID, ClaimedBy, Zone, OrgID, Region string
	HubID                              *string
}

// PlaceRegistrations places a batch of claimed registrations: those placed
// before keep their hub, the others are placed zone by zone, each zone in one
// transaction (placeZone). A claim lost before its zone's turn places
// nothing and gets CodeConflict.
func (q *Queue) PlaceRegistrations(ctx context.Context, claims []fleet.Claim, modes []fleet.DeliveryMode) ([]fleet.Placement, error) {
	out := make([]fleet.Placement, len(claims))
	ids := make([]string, len(claims))
	for i, c := range claims {
		out[i].ID, ids[i] = c.Registration.ID, c.Registration.ID
	}
	var rows []placeRow
	if err := q.store.db.Gorm.WithContext(ctx).Raw(`SELECT id, coalesce(claimed_by, '') AS claimed_by, zone, org_id, region, hub_id FROM registrations
WHERE id IN ? AND deleted_at IS NULL`, ids).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("PlaceRegistrations(%d): %w", len(claims), err)
	}
	byID := make(map[string]placeRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	zones, placedOn := map[string][]placeRow{}, map[string][]int{}
	for i, c := range claims {
		r, ok := byID[c.Registration.ID]
		switch {
		case !ok || r.ClaimedBy != c.Token:
			out[i].Err = lostClaim(c.Registration.ID)
		case r.HubID != nil:
			placedOn[*r.HubID] = append(placedOn[*r.HubID], i)
		default:
			zones[r.Zone] = append(zones[r.Zone], placeRow{ID: r.ID, ClaimedBy: c.Token, Zone: r.Zone, OrgID: r.OrgID, Region: r.Region})
		}
	}
	if err := q.readPlacedHubs(ctx, placedOn, out); err != nil {
		return nil, fmt.Errorf("PlaceRegistrations(%d): %w", len(claims), err)
	}
	at := make(map[string]int, len(claims))
	for i, c := range claims {
		at[c.Registration.ID] = i
	}
	for _, zone := range slices.Sorted(maps.Keys(zones)) {
		batch := zones[zone]
		placed, err := q.placeZone(ctx, zone, batch, modes)
		for _, r := range batch {
			p := &out[at[r.ID]]
			switch hub, ok := placed[r.ID]; {
			case err != nil:
				p.Err = fmt.Errorf("placing in zone %s: %w", zone, err)
			case !ok:
				p.Err = lostClaim(r.ID)
			default:
				p.Hub = hub
			}
		}
	}
	return out, nil
}

// readPlacedHubs fills in the hubs of the registrations placed before.
func (q *Queue) readPlacedHubs(ctx context.Context, placedOn map[string][]int, out []fleet.Placement) error {
	if len(placedOn) == 0 {
		return nil
	}
	var hubs []hubRow
	if err := q.store.db.Gorm.WithContext(ctx).Where("id IN ? AND deleted_at IS NULL", slices.Collect(maps.Keys(placedOn))).
		Find(&hubs).Error; err != nil {
		return err
	}
	found := make(map[string]fleet.Hub, len(hubs))
	for _, h := range hubs {
		found[h.ID] = h.toHub()
	}
	for hubID, regs := range placedOn {
		hub, ok := found[hubID]
		for _, i := range regs {
			if !ok {
				out[i].Err = notFound("hub", hubID)
				continue
			}
			out[i].Hub = ptrTo(hub)
		}
	}
	return nil
}

// placeZone places a zone's unplaced registrations in one transaction: under
// the zone's placement lock (ADR 0005), it locks the zone's hubs that
// qualify, assigns every registration in one go (assignHubs), then writes the
// registrations' hub_id and the hubs' placed_count with one statement each.
// Only rows that still hold their claim are placed, and the counts are those
// of the rows placed. It returns the hub of each registration placed, nil for
// one no hub qualified for; one missing lost its claim.
func (q *Queue) placeZone(ctx context.Context, zone string, batch []placeRow, modes []fleet.DeliveryMode) (map[string]*fleet.Hub, error) {
	var placed map[string]*fleet.Hub
	err := q.store.transactRetrying(ctx, func(tx *gorm.DB) error {
		placed = make(map[string]*fleet.Hub, len(batch))
		if err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended('placement:' || ?, 0))`, zone).Error; err != nil {
			return err
		}
		orgs := map[string]bool{}
		for _, r := range batch {
			orgs[r.OrgID] = true
		}
		var hubs []hubRow
		err := tx.Raw(`SELECT h.* FROM hubs h
WHERE h.deleted_at IS NULL AND NOT h.cordoned AND h.zone = ? AND h.placed_count < h.capacity
  AND (h.owner_org_id IS NULL OR h.owner_org_id IN ?)
  AND h.delivery_mode IN ? AND `+hubReadySQL+`
ORDER BY h.id
FOR UPDATE OF h`, zone, slices.Sorted(maps.Keys(orgs)), modeStrings(modes), q.store.cfg.HeartbeatTimeout.Seconds()).Scan(&hubs).Error
		if err != nil {
			return err
		}
		assigned := assignHubs(batch, hubs)
		for _, r := range batch {
			if _, ok := assigned[r.ID]; !ok {
				placed[r.ID] = nil // no hub qualifies
			}
		}
		if len(assigned) == 0 {
			return nil
		}
		type assignment struct {
			ID    string `json:"id"`
			Token string `json:"token"`
			HubID string `json:"hub_id"`
		}
		rows := make([]assignment, 0, len(assigned))
		for _, r := range batch {
			if h, ok := assigned[r.ID]; ok {
				rows = append(rows, assignment{ID: r.ID, Token: r.ClaimedBy, HubID: hubs[h].ID})
			}
		}
		// In id order, as every batch locks registrations, so two cannot deadlock.
		slices.SortFunc(rows, func(a, b assignment) int { return strings.Compare(a.ID, b.ID) })
		var written []struct{ ID, HubID string }
		err = tx.Raw(`WITH a AS (SELECT * FROM jsonb_to_recordset(?::jsonb) AS a(id text, token text, hub_id text)),
held AS (SELECT r.id, a.hub_id FROM registrations r JOIN a ON r.id = a.id
	WHERE r.claimed_by = a.token AND r.hub_id IS NULL AND r.deleted_at IS NULL ORDER BY r.id FOR UPDATE OF r)
UPDATE registrations r SET hub_id = held.hub_id, updated_at = now() FROM held WHERE r.id = held.id
RETURNING r.id, r.hub_id`, jsonText(rows)).Scan(&written).Error
		if err != nil {
			return err
		}
		byHub := map[string]int{}
		for _, w := range written {
			byHub[w.HubID]++
		}
		type count struct {
			ID string `json:"id"`
			N  int    `json:"n"`
		}
		counts := make([]count, 0, len(byHub))
		for _, id := range slices.Sorted(maps.Keys(byHub)) {
			counts = append(counts, count{ID: id, N: byHub[id]})
		}
		if err := tx.Exec(`UPDATE hubs h SET placed_count = h.placed_count + c.n, updated_at = now()
FROM jsonb_to_recordset(?::jsonb) AS c(id text, n integer) WHERE h.id = c.id`, jsonText(counts)).Error; err != nil {
			return err
		}
		index := make(map[string]int, len(hubs))
		for i, h := range hubs {
			index[h.ID] = i
		}
		for _, w := range written {
			h := hubs[index[w.HubID]]
			h.PlacedCount += byHub[w.HubID]
			placed[w.ID] = ptrTo(h.toHub())
		}
		return nil
	})
	return placed, err
}

// assignHubs chooses a hub (an index into hubs) for each registration of
// batch, in order, each seeing the places the earlier ones took: the
// registration's organisation's own hubs first, then its region's, then the
// least loaded (placed_count / capacity), then the fewest placed, then the
// lowest id, among the hubs with room that it may use. A registration left
// out found none.
func assignHubs(batch []placeRow, hubs []hubRow) map[string]int {
	placed := make([]int, len(hubs))
	for i, h := range hubs {
		placed[i] = h.PlacedCount
	}
	better := func(r placeRow, a, b int) bool {
		ownA, ownB := hubs[a].OwnerOrgID != nil, hubs[b].OwnerOrgID != nil
		if ownA != ownB {
			return ownA
		}
		if inA, inB := hubs[a].Region == r.Region, hubs[b].Region == r.Region; inA != inB {
			return inA
		}
		// a/ca < b/cb without division: capacities are positive.
		if la, lb := placed[a]*hubs[b].Capacity, placed[b]*hubs[a].Capacity; la != lb {
			return la < lb
		}
		if placed[a] != placed[b] {
			return placed[a] < placed[b]
		}
		return hubs[a].ID < hubs[b].ID
	}
	out := make(map[string]int, len(batch))
	for _, r := range batch {
		best := -1
		for i, h := range hubs {
			if placed[i] >= h.Capacity || h.OwnerOrgID != nil && *h.OwnerOrgID != r.OrgID {
				continue
			}
			if best < 0 || better(r, i, best) {
				best = i
			}
		}
		if best >= 0 {
			placed[best]++
			out[r.ID] = best
		}
	}
	return out
}

// completionWrite is one row's part of the batch UPDATE.
type completionWrite struct {
	ID                 string          `json:"id"`
	Conditions         json.RawMessage `json:"conditions"`
	Phase              string          `json:"phase"`
	ObservedGeneration int64           `json:"observed_generation"`
	Failed             bool            `json:"failed"`
	LastError          string          `json:"last_error"`
	DueNow             bool            `json:"due_now"`
	Woken              bool            `json:"woken"`
	RequeueSeconds     *float64        `json:"requeue_seconds"`
	DeliveredVia       *string         `json:"delivered_via"`
}

// CompleteRegistrations records a batch of outcomes in one transaction, each
// as release does for CompleteRegistration: only on rows that still hold the
// claim, with the backoff of a failure computed in the statement, and due at
// once when the row changed or was woken during the claim. A row keeps
// woken_by_ack (the claim's first tier, claimTiers) only when it was woken
// during the claim, as an acknowledgement the pass may not have seen, or
// when its pass failed, so that it is claimed first again after its
// backoff; a pass that succeeded saw what the acknowledgements before it
// finished. The rows are locked in id order, then written with one
// statement.
func (q *Queue) CompleteRegistrations(ctx context.Context, done []fleet.Completion) ([]bool, error) {
	type claim struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	claims := make([]claim, len(done))
	for i, d := range done {
		if d.Outcome.Delete {
			return nil, fleet.Errorf(fleet.CodeValidation, "CompleteRegistrations records no deletion")
		}
		claims[i] = claim{ID: d.Outcome.ID, Token: d.Token}
	}
	slices.SortFunc(claims, func(a, b claim) int { return strings.Compare(a.ID, b.ID) })
	kept := make([]bool, len(done))
	err := q.store.transactRetrying(ctx, func(tx *gorm.DB) error {
		clear(kept)
		var rows []registrationRow
		err := tx.Raw(`SELECT r.id, r.claimed_by, r.generation, r.hub_conditions, r.deletion_requested_at, r.next_attempt_at, r.claimed_until
FROM registrations r JOIN jsonb_to_recordset(?::jsonb) AS c(id text, token text) ON r.id = c.id AND r.claimed_by = c.token
WHERE r.deleted_at IS NULL ORDER BY r.id FOR UPDATE OF r`, jsonText(claims)).Scan(&rows).Error
		if err != nil || len(rows) == 0 {
			return err
		}
		held := make(map[string]registrationRow, len(rows))
		for _, r := range rows {
			held[r.ID] = r
		}
		writes := make([]completionWrite, 0, len(rows))
		for i, d := range done {
			r, ok := held[d.Outcome.ID]
			kept[i] = ok && deref(r.ClaimedBy) == d.Token
			if kept[i] {
				writes = append(writes, completionOf(r, d.Outcome))
			}
		}
		slices.SortFunc(writes, func(a, b completionWrite) int { return strings.Compare(a.ID, b.ID) })
		return tx.Exec(`UPDATE registrations r SET conditions = w.conditions, phase = w.phase, observed_generation = w.observed_generation,
	attempts = CASE WHEN w.failed THEN r.attempts + 1 ELSE 0 END, last_error = w.last_error,
	next_attempt_at = CASE
		WHEN w.failed THEN now() + least(make_interval(secs => ?) * power(2, least(r.attempts, 30)), make_interval(secs => ?))
		WHEN w.due_now THEN now()
		WHEN w.requeue_seconds IS NOT NULL THEN now() + make_interval(secs => w.requeue_seconds)
	END,
	delivered_via = coalesce(w.delivered_via, r.delivered_via), woken_by_ack = r.woken_by_ack AND (w.woken OR w.failed),
	claimed_by = NULL, claimed_until = NULL, updated_at = now()
FROM jsonb_to_recordset(?::jsonb) AS w(id text, conditions jsonb, phase text, observed_generation bigint, failed boolean, last_error text,
	due_now boolean, woken boolean, requeue_seconds float8, delivered_via text)
WHERE r.id = w.id`, q.cfg.BackoffBase.Seconds(), q.cfg.BackoffMax.Seconds(), jsonText(writes)).Error
	})
	if err != nil {
		return nil, fmt.Errorf("CompleteRegistrations(%d): %w", len(done), err)
	}
	return kept, nil
}

// completionOf is what release writes for out on the locked row r: the phase
// derived from the new conditions and the row's other facts, and the next
// attempt.
func completionOf(r registrationRow, out fleet.Outcome) completionWrite {
	facts := factsOf(r)
	facts.conditions = out.Conditions
	w := completionWrite{ID: r.ID, Conditions: json.RawMessage(jsonText(out.Conditions)), Phase: facts.phase(), ObservedGeneration: out.ObservedGeneration,
		Woken: wokenDuringClaim(r)}
	if out.Err != nil {
		w.Failed, w.LastError = true, storableText(out.Err.Error())
		return w
	}
	if out.RequeueAfter > 0 {
		w.RequeueSeconds = ptrTo(out.RequeueAfter.Seconds())
	}
	// A change or a wake-up during the pass means the pass saw stale facts.
	w.DueNow = r.Generation != out.ObservedGeneration || w.Woken
	if out.DeliveredVia != "" {
		w.DeliveredVia = ptrTo(string(out.DeliveredVia))
	}
	return w
}

// storableText drops what a jsonb or text column cannot hold: NUL, and bytes
// outside UTF-8.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

func lostClaim(id string) error {
	return fleet.Errorf(fleet.CodeConflict, "the claim on registration %s was lost", id)
}

// maxDeadlockRetries bounds transactRetrying's tries.
const maxDeadlockRetries = 3

// transactRetrying runs fn in a transaction, again when PostgreSQL ended it
// to break a deadlock or a serialization failure. A batch that locks many
// rows can meet a statement that locks some of them in another order
// (RequeueUnplaced's UPDATE, for one); each try starts from the database
// afresh, so fn must not keep what a failed try wrote to its variables.
func (s *core) transactRetrying(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var err error
	for range maxDeadlockRetries {
		if err = s.transact(ctx, fn); !retryable(err) {
			return err
		}
	}
	return err
}

// retryable reports a deadlock (40P01) or a serialization failure (40001).
func retryable(err error) bool {
	code := sqlState(err)
	return code == "40P01" || code == "40001"
}
