package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// AgentDelivery delivers registrations to hubs that run fleetshard-sync: it
// publishes them into the hub's desired set (the hub's live, not withdrawn
// registrations), bumps the hub's revision and wakes the agent's long-poll.
// The hub holds the objects once its agent acknowledges that revision.
type AgentDelivery struct {
	store *Store
}

// NewAgentDelivery returns the delivery of the agent mode.
func NewAgentDelivery(store *Store) *AgentDelivery { return &AgentDelivery{store: store} }

// Deliver publishes reg's current generation once, then reports whether the
// agent acknowledged a revision that carries it, and applied its objects: an
// agent that reported the hub refused them (at that revision or later) has
// not delivered it, whatever became of the rest of the hub's set. It is
// DeliverBatch of one registration.
func (d *AgentDelivery) Deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	results, err := d.DeliverBatch(ctx, hub, []fleet.Registration{reg})
	if err == nil {
		err = results[0].Err
	}
	if err != nil {
		return fleet.DeliveryReport{}, fmt.Errorf("Deliver(%s to %s): %w", reg.ID, hub.Name, err)
	}
	return results[0].Report, nil
}

// publishRow is what a delivery reads of a registration placed on the hub.
type publishRow struct {
	ID                  string
	Generation          int64
	PublishedRevision   *int64
	PublishedGeneration *int64
	DeliveryFailure     *string
}

// DeliverBatch publishes, in one revision of the hub's desired set, those of
// regs whose current generation is not published yet: one revision bump and
// one wake-up of the agent for them all. Then it reports on each as Deliver
// does. A registration not placed on the hub gets CodeConflict.
func (d *AgentDelivery) DeliverBatch(ctx context.Context, hub fleet.Hub, regs []fleet.Registration) ([]fleet.DeliveryResult, error) {
	ids := make([]string, len(regs))
	for i, r := range regs {
		ids[i] = r.ID
	}
	var rows []publishRow
	var revision, applied int64
	err := d.store.transactRetrying(ctx, func(tx *gorm.DB) error {
		rows, revision = nil, 0
		if err := tx.Raw(`SELECT id, generation, published_revision, published_generation, delivery_failure::text AS delivery_failure
FROM registrations WHERE id IN ? AND hub_id = ?`, ids, hub.ID).Scan(&rows).Error; err != nil {
			return err
		}
		var stale []string
		for _, r := range rows {
			if r.PublishedRevision == nil || deref64(r.PublishedGeneration) != r.Generation {
				stale = append(stale, r.ID)
			}
		}
		if len(stale) == 0 {
			var err error
			applied, err = appliedRevision(tx, hub.ID)
			return err
		}
		// The hub first, then its registrations in id order, as the
		// agent's heartbeat locks them: the two cannot deadlock.
		var err error
		if revision, applied, err = moveRevision(tx, hub.ID); err != nil {
			return err
		}
		slices.Sort(stale)
		return tx.Exec(`WITH stale AS (SELECT id FROM registrations WHERE id IN ? AND hub_id = ? ORDER BY id FOR UPDATE)
UPDATE registrations r SET published_revision = ?, published_generation = r.generation FROM stale WHERE r.id = stale.id`,
			stale, hub.ID, revision).Error
	})
	if err != nil {
		return nil, fmt.Errorf("DeliverBatch(%d to %s): %w", len(regs), hub.Name, err)
	}
	if revision > 0 {
		d.store.wakeHub(hub.ID)
	}
	byID := make(map[string]publishRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	out := make([]fleet.DeliveryResult, len(regs))
	for i, reg := range regs {
		r, ok := byID[reg.ID]
		if !ok {
			out[i].Err = fleet.Errorf(fleet.CodeConflict, "registration %s is not placed on hub %s", reg.ID, hub.ID)
			continue
		}
		if r.PublishedRevision == nil || deref64(r.PublishedGeneration) != r.Generation {
			out[i].Report = publishedReport(hub, revision, applied, nil)
			continue
		}
		failure, err := decodeFailure(r.ID, r.DeliveryFailure)
		out[i] = fleet.DeliveryResult{Report: publishedReport(hub, *r.PublishedRevision, applied, failure), Err: err}
	}
	return out, nil
}

// publishedReport is where a registration published in revision published
// stands once the agent applied revision applied: not acknowledged yet,
// refused by the hub (a failure this hub reported at that revision or later;
// one another hub reported, before the registration moved, is not this
// hub's), or delivered.
func publishedReport(hub fleet.Hub, published, applied int64, failure *storedFailure) fleet.DeliveryReport {
	if applied >= published && failure != nil && failure.HubID == hub.ID && failure.Revision >= published {
		return fleet.DeliveryReport{Reason: failure.Reason,
			Message: fmt.Sprintf("the agent of hub %s could not apply it at revision %d: %s", hub.Name, failure.Revision, failure.Message)}
	}
	if applied >= published {
		return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonAcknowledged,
			Message: fmt.Sprintf("the agent of hub %s applied revision %d", hub.Name, applied)}
	}
	return fleet.DeliveryReport{Reason: fleet.ReasonPublished,
		Message: fmt.Sprintf("published in revision %d of hub %s; the agent applied %d so far", published, hub.Name, applied)}
}

// Withdraw takes reg out of the hub's desired set once, then reports whether
// the agent acknowledged a revision without it.
func (d *AgentDelivery) Withdraw(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	var withdrawn, applied int64
	moved := false
	err := d.store.transact(ctx, func(tx *gorm.DB) error {
		moved = false
		row, err := lockPlaced(tx, reg.ID, hub.ID)
		if err != nil {
			return err
		}
		if row.WithdrawnRevision != nil {
			withdrawn = *row.WithdrawnRevision
			applied, err = appliedRevision(tx, hub.ID)
			return err
		}
		withdrawn, applied, err = moveRevision(tx, hub.ID)
		if err != nil {
			return err
		}
		moved = true
		return tx.Exec(`UPDATE registrations SET withdrawn_revision = ? WHERE id = ?`, withdrawn, reg.ID).Error
	})
	if err != nil {
		return fleet.DeliveryReport{}, fmt.Errorf("Withdraw(%s from %s): %w", reg.ID, hub.Name, err)
	}
	if moved {
		d.store.wakeHub(hub.ID)
	}
	if applied >= withdrawn {
		return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonRemoved,
			Message: fmt.Sprintf("the agent of hub %s applied revision %d without it", hub.Name, applied)}, nil
	}
	return fleet.DeliveryReport{Reason: fleet.ReasonWithdrawing,
		Message: fmt.Sprintf("withdrawn in revision %d of hub %s; the agent applied %d so far", withdrawn, hub.Name, applied)}, nil
}

func lockPlaced(tx *gorm.DB, id, hubID string) (registrationRow, error) {
	var row registrationRow
	err := tx.Raw(`SELECT * FROM registrations WHERE id = ? AND hub_id = ? FOR UPDATE`, id, hubID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, fleet.Errorf(fleet.CodeConflict, "registration %s is not placed on hub %s", id, hubID)
	}
	return row, err
}

// bumpRevision moves a hub's desired-set revision and wakes its agent once
// tx committed (wakeAfterCommit).
func bumpRevision(tx *gorm.DB, hubID string) (revision, applied int64, err error) {
	if revision, applied, err = moveRevision(tx, hubID); err != nil {
		return 0, 0, err
	}
	return revision, applied, wakeAfterCommit(tx, ChannelHubRevision, hubID)
}

// moveRevision moves a hub's desired-set revision; the caller wakes its
// agent after the commit (core.wakeHub), as the deliveries do, or asks
// bumpRevision to.
func moveRevision(tx *gorm.DB, hubID string) (revision, applied int64, err error) {
	var r struct{ Revision, AppliedRevision int64 }
	err = tx.Raw(`UPDATE hubs SET revision = revision + 1 WHERE id = ? RETURNING revision, applied_revision`, hubID).Scan(&r).Error
	return r.Revision, r.AppliedRevision, err
}

func appliedRevision(tx *gorm.DB, hubID string) (int64, error) {
	var applied int64
	err := tx.Raw(`SELECT applied_revision FROM hubs WHERE id = ?`, hubID).Scan(&applied).Error
	return applied, err
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// revisionHistorySQL names the history the database's revisions count in:
// its system identifier and its current timeline (fleet_revision_history,
// migration 202612021200). A restore to an earlier point in time and a
// standby's promotion start a new timeline, and a database made anew has
// another identifier, so the hub revisions an agent holds from before are
// not this history's, whatever their numbers.
const revisionHistorySQL = `fleet_revision_history()`

// agentHub reads the live hub bound to agentIdentity, with its heartbeat
// freshness and the history its revisions count in; lock holds its row for the transaction, serialising one hub's
// reports. Any other hub, a hub of a zone this deployment does not serve,
// or no identity, is not found: an agent learns nothing of hubs not its own.
func (s *HubStore) agentHub(tx *gorm.DB, hubID, agentIdentity string, lock bool) (hubRow, error) {
	var hub hubRow
	if agentIdentity == "" {
		return hub, notFound("hub", hubID)
	}
	zones, zoneArgs := s.servedZonesSQL("h.zone")
	query := `SELECT h.*, ` + heartbeatFreshSQL + ` AS heartbeat_fresh, ` + revisionHistorySQL + ` AS revision_history FROM hubs h
WHERE h.id = ? AND h.agent_identity = ? AND h.deleted_at IS NULL AND ` + zones
	if lock {
		query += ` FOR UPDATE`
	}
	err := tx.Raw(query, append([]any{s.cfg.HeartbeatTimeout.Seconds(), hubID, agentIdentity}, zoneArgs...)...).Take(&hub).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return hub, notFound("hub", hubID)
	}
	return hub, err
}

// FindAgentHub returns the hub bound to agentIdentity.
func (s *HubStore) FindAgentHub(ctx context.Context, hubID, agentIdentity string) (fleet.Hub, error) {
	row, err := s.agentHub(s.db.Gorm.WithContext(ctx), hubID, agentIdentity, false)
	if err != nil {
		return fleet.Hub{}, fmt.Errorf("FindAgentHub(%s): %w", hubID, err)
	}
	return row.toHub(), nil
}

// RecordHubHeartbeat stores an agent's report, one hub row whatever the
// report acknowledges. An acknowledgement of a newer revision wakes
// provisioning_mgr, whose passes wake the registrations it delivered or
// withdrew a batch at a time (Queue.WakeAcknowledged); a hub that comes back
// from silence wakes hub_mgr, so waiting registrations are placed.
func (s *HubStore) RecordHubHeartbeat(ctx context.Context, hubID, agentIdentity string, hb fleet.HubHeartbeat) (fleet.Hub, error) {
	var (
		applied int64
		history string
	)
	err := s.transact(ctx, func(tx *gorm.DB) error {
		old, err := s.agentHub(tx, hubID, agentIdentity, true)
		if err != nil {
			return err
		}
		history = old.RevisionHistory
		applied = max(old.AppliedRevision, min(hb.AppliedRevision, old.Revision))
		// A restarted agent, or one back from silence, resends its whole inventory.
		restarted := hb.AgentStartGeneration != old.AgentStartGeneration
		err = tx.Exec(`UPDATE hubs SET last_heartbeat_at = now(), agent_version = ?, agent_start_generation = ?, applied_revision = ?,
	conditions = ?, agent_capacity = ?, resync_requested = resync_requested OR ? OR inventory_stale OR NOT ?
WHERE id = ?`, hb.AgentVersion, hb.AgentStartGeneration, applied,
			jsonText(fleet.MergeAgentConditions(old.Conditions, hb.Conditions, s.clock.Now())), jsonText(orEmpty(hb.Capacity)),
			restarted, old.HeartbeatFresh, hubID).Error
		if err != nil {
			return err
		}
		// The failures commit with the revision they were reported at, so
		// that no pass takes that revision for a clean delivery.
		if hb.FailuresReported {
			if err := s.recordDeliveryFailures(tx, hubID, applied, hb.Failures); err != nil {
				return err
			}
		}
		// The registrations the newly applied revisions finished are woken
		// by provisioning_mgr, a batch a pass (Queue.WakeAcknowledged).
		if applied > old.WokenRevision {
			if err := wakeAfterCommit(tx, ChannelRegistrations, hubID); err != nil {
				return err
			}
		}
		// A hub back from silence, or whose agent's own readiness moved,
		// has hub_mgr derive its Ready condition again at once.
		if !old.HeartbeatFresh || fleet.AgentReadinessMoved(old.Conditions, hb.Conditions) {
			return wakeAfterCommit(tx, ChannelHubs, hubID)
		}
		return nil
	})
	if err != nil {
		return fleet.Hub{}, fmt.Errorf("RecordHubHeartbeat(%s): %w", hubID, err)
	}
	hub, err := s.FindHub(ctx, hubID)
	hub.RevisionHistory = history
	return hub, err
}
