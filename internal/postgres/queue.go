package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// QueueConfig is the backoff of failed reconcile passes.
type QueueConfig struct {
	// BackoffBase is the wait after the first failure; it doubles per attempt.
	BackoffBase time.Duration
	// BackoffMax caps the wait.
	BackoffMax time.Duration
}

// Queue is the registration work queue on PostgreSQL: rows are claimed with
// FOR UPDATE SKIP LOCKED and a lease, so replicas share the work without a
// leader and a replica that dies loses only its leases.
//
// A claim moves next_attempt_at to the end of the lease: the row falls due
// again by itself if its claimant dies, and a wake-up during the pass (which
// sets next_attempt_at to now) is seen at release as next_attempt_at before
// claimed_until, so the row is due again at once instead of being lost.
type Queue struct {
	store *Store
	cfg   QueueConfig
}

// NewQueue returns the queue of store's registrations.
func NewQueue(store *Store, cfg QueueConfig) *Queue { return &Queue{store: store, cfg: cfg} }

// ClaimRegistrations leases registrations due for work of kind. The claim
// gets one token, held in claimed_by by every row it leases: the owner
// followed by a random uuid drawn for this call. The owner says which
// process holds the rows, the uuid which of its claims, so that a pass that
// outlived its lease cannot complete a later claim of the same process
// (provisioning_mgr and deleting_mgr share the owner).
//
// Each tier (claimTiers) leases in a transaction of its own, committed at
// once, so that the rows it leased are known before the commit. On an error the claims returned, with only Registration.ID and
// Token set, are those the call may still hold: a commit whose answer was
// lost, or rows leased whose read failed. The caller holds their token and
// frees them with ReleaseRegistrations once the database answers, instead
// of leaving them to the lease's end.
func (q *Queue) ClaimRegistrations(ctx context.Context, kind fleet.WorkKind, owner string, limit int, lease time.Duration) ([]fleet.Claim, error) {
	token := owner + "/" + uuid.NewString()
	var ids []string
	var err error
	// Each tier in turn fills what the ones before it left of the batch. A
	// transaction per tier holds its rows' locks no longer than its
	// statement did alone, however long the tiers after it take.
	for _, tier := range claimTiers {
		if len(ids) >= limit {
			break
		}
		var more []string
		err = q.store.transact(ctx, func(tx *gorm.DB) error {
			more = nil
			return tx.Raw(claimStatement(kind, tier), limit-len(ids), token, lease.Seconds(), lease.Seconds()).Scan(&more).Error
		})
		ids = append(ids, more...)
		if err != nil {
			break
		}
	}
	if err != nil || len(ids) == 0 {
		return heldClaims(ids, token), wrapErr("ClaimRegistrations", string(kind), err)
	}
	var rows []registrationRow
	err = registrations(q.store.db.Gorm.WithContext(ctx)).
		Select(claimColumns+", h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region, extract(epoch FROM now() - r.deletion_requested_at) AS deletion_age_seconds").
		Where("r.id IN ?", ids).Order("r.id").Find(&rows).Error
	if err != nil {
		return heldClaims(ids, token), wrapErr("ClaimRegistrations", string(kind), err)
	}
	claims := make([]fleet.Claim, len(rows))
	for i, r := range rows {
		claims[i] = fleet.Claim{Registration: r.toRegistration(), Token: token, Attempts: r.Attempts}
		if r.DeletionAgeSeconds != nil {
			claims[i].DeletionAge = time.Duration(*r.DeletionAgeSeconds * float64(time.Second))
		}
	}
	return claims, nil
}

// heldClaims are the claims of a failed ClaimRegistrations: the rows it may
// hold under token, nothing else read.
func heldClaims(ids []string, token string) []fleet.Claim {
	if len(ids) == 0 {
		return nil
	}
	claims := make([]fleet.Claim, len(ids))
	for i, id := range ids {
		claims[i] = fleet.Claim{Registration: fleet.Registration{ID: id}, Token: token}
	}
	return claims
}

// ReleaseRegistrations frees the rows among ids that still hold the claim
// named by token, recording nothing: the rows are due again at once, their
// attempts unchanged. A row another claim took since (its lease ran out) is
// not touched: the token proves the claim is still the caller's. It
// returns how many rows it freed.
func (q *Queue) ReleaseRegistrations(ctx context.Context, token string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var freed int
	err := q.store.transactRetrying(ctx, func(tx *gorm.DB) error {
		// In id order, as every statement that locks several registrations.
		res := tx.Exec(`WITH held AS (SELECT id FROM registrations WHERE id IN ? AND claimed_by = ? ORDER BY id FOR UPDATE)
UPDATE registrations r SET claimed_by = NULL, claimed_until = NULL, next_attempt_at = least(r.next_attempt_at, now())
FROM held WHERE r.id = held.id`, ids, token)
		freed = int(res.RowsAffected)
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("ReleaseRegistrations(%d): %w", len(ids), err)
	}
	return freed, nil
}

// claimColumns are the columns of a claimed registration: all but the import
// material, which no reconciler reads and which an agent's report makes the
// largest column of a row.
const claimColumns = `r.id, r.created_at, r.updated_at, r.deletion_requested_at, r.deleted_at, r.org_id, r.owner, r.name,
	r.display_name, r.labels, r.zone, r.region, r.product, r.credentials, r.credentials_key_id, r.hub_id, r.delivered_via,
	r.conditions, r.phase, r.generation, r.observed_generation, r.published_revision, r.published_generation,
	r.withdrawn_revision, r.next_attempt_at, r.attempts, r.claimed_by, r.claimed_until, r.last_error, r.hub_conditions`

// unsettledSQL tells a registration a user waits for: not ready (new,
// placed and not delivered yet, failing, being deregistered), or changed
// since it was last reconciled. The index registrations_work_unsettled
// (migrations.migration202612012200ClaimOrder, which repeats this predicate)
// holds those that are due.
const unsettledSQL = `(phase <> 'ready' OR observed_generation < generation)`

// claimTiers are the claim's tiers, in the order a batch is filled, each
// the due rows a predicate holds for, oldest due first, found through an
// index (the first two through partial indexes of their own):
//
//   - woken_by_ack: registrations whose delivery or withdrawal the hub's
//     agent acknowledged since their last pass (wakeAcknowledged). Their
//     pass only records what the acknowledgement finished (Delivered, or
//     the removal), and the user waits for just that. Ordered with the rest
//     they would wait, woken at now(), behind every row that fell due before
//     the acknowledgement: during a bulk onboarding, behind every
//     registration not placed yet. The tier is bounded by what the agents
//     acknowledged, which is what earlier passes published, once per
//     publication; so it cannot starve placement: while both have work, it
//     takes at most as many rows as placement and publication fed it.
//     Index registrations_work_acknowledged
//     (migration202612020200ClaimAcknowledged) holds only such rows.
//   - unsettledSQL: the rest of the work a user waits for.
//   - the rechecks of settled registrations, so that a backlog of them never
//     delays a new or changed registration.
var claimTiers = []string{`woken_by_ack`, unsettledSQL, `NOT ` + unsettledSQL}

// claimStatement leases the due rows of kind that tier holds for; its
// parameters are the limit, the claim's token and the lease in seconds
// (twice).
func claimStatement(kind fleet.WorkKind, tier string) string {
	return `
WITH due AS (
	SELECT id FROM registrations
	WHERE deleted_at IS NULL AND next_attempt_at <= now()
	  AND ` + workKindSQL(kind) + `
	  AND (claimed_until IS NULL OR claimed_until < now())
	  AND ` + tier + `
	ORDER BY next_attempt_at, id
	LIMIT ?
	FOR UPDATE SKIP LOCKED)
UPDATE registrations r SET claimed_by = ?, claimed_until = now() + make_interval(secs => ?),
	next_attempt_at = now() + make_interval(secs => ?)
FROM due WHERE r.id = due.id
RETURNING r.id`
}

// nextDueStatement reads in how many seconds the next row of kind is due.
func nextDueStatement(kind fleet.WorkKind) string {
	return `SELECT extract(epoch FROM min(next_attempt_at) - now())
FROM registrations WHERE deleted_at IS NULL AND next_attempt_at IS NOT NULL AND ` + workKindSQL(kind)
}

// workKindSQL selects the registrations of one kind of work: those being
// deregistered for deleting_mgr, the others for provisioning_mgr. It is
// written out, not compared with a parameter, so that the planner can take
// the partial index of the registrations being deregistered
// (migration202612020300DeprovisionWork): a deregistration's claim and
// NextDue then read the few such rows, not every due registration.
func workKindSQL(kind fleet.WorkKind) string {
	if kind == fleet.WorkDeprovision {
		return "deletion_requested_at IS NOT NULL"
	}
	return "deletion_requested_at IS NULL"
}

// CompleteRegistration writes a pass's outcome if the row still holds the
// claim named by token (fleet.Claim.Token). A claim whose lease ran out is
// kept as long as nobody claimed the row since: its outcome is still the
// latest word on the row. An outcome that does not delete is recorded as
// CompleteRegistrations records a batch of one.
func (q *Queue) CompleteRegistration(ctx context.Context, token string, out fleet.Outcome) (bool, error) {
	if !out.Delete {
		kept, err := q.CompleteRegistrations(ctx, []fleet.Completion{{Token: token, Outcome: out}})
		if err != nil {
			return false, fmt.Errorf("CompleteRegistration(%s): %w", out.ID, err)
		}
		return kept[0], nil
	}
	var kept bool
	err := q.store.transact(ctx, func(tx *gorm.DB) error {
		var reg registrationRow
		err := tx.Raw(`SELECT * FROM registrations WHERE id = ? AND claimed_by = ? AND deleted_at IS NULL FOR UPDATE`, out.ID, token).Take(&reg).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		kept = true
		return q.softDelete(tx, reg, out)
	})
	if err != nil {
		return false, fmt.Errorf("CompleteRegistration(%s): %w", out.ID, err)
	}
	return kept, nil
}

// softDelete ends a registration and gives its hub place back.
func (q *Queue) softDelete(tx *gorm.DB, reg registrationRow, out fleet.Outcome) error {
	facts := factsOf(reg)
	facts.conditions, facts.deleted = out.Conditions, true
	err := writeFacts(tx, reg.ID, facts, map[string]any{"updated_at": gorm.Expr("now()"), "observed_generation": out.ObservedGeneration,
		"claimed_by": nil, "claimed_until": nil, "next_attempt_at": nil, "last_error": ""})
	if err != nil || reg.HubID == nil {
		return err
	}
	if err := tx.Exec(`UPDATE hubs SET placed_count = placed_count - 1, updated_at = now() WHERE id = ?`, *reg.HubID).Error; err != nil {
		return err
	}
	// Room on the hub: unplaced registrations of its zone may fit now.
	return wakeAfterCommit(tx, ChannelHubs, *reg.HubID)
}

// wokenDuringClaim reports whether something set next_attempt_at to now
// while the row was claimed (the claim had set it to the lease's end).
func wokenDuringClaim(reg registrationRow) bool {
	return reg.NextAttemptAt != nil && reg.ClaimedUntil != nil && reg.NextAttemptAt.Before(*reg.ClaimedUntil)
}

func modeStrings(modes []fleet.DeliveryMode) []string {
	out := make([]string, 0, len(modes))
	for _, m := range modes {
		out = append(out, string(m))
	}
	slices.Sort(out)
	return out
}

func ptrTo[T any](v T) *T { return &v }

// wrapErr adds call-shaped context to a non-nil error.
func wrapErr(call, arg string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s(%s): %w", call, arg, err)
}

// FindHub returns a live hub (for the reconcilers).
func (q *Queue) FindHub(ctx context.Context, id string) (fleet.Hub, error) {
	return q.store.FindHub(ctx, id)
}

// WakeAcknowledged wakes at most limit registrations whose delivery or
// withdrawal a hub's agent acknowledged since they were last woken, each
// hub a share (HubStore.wakeAcknowledged); more is true while acknowledged
// ones remain.
func (q *Queue) WakeAcknowledged(ctx context.Context, limit int) (int, bool, error) {
	return q.store.HubStore.wakeAcknowledged(ctx, limit)
}

// NextDue returns the wait until the next scheduled registration of kind.
func (q *Queue) NextDue(ctx context.Context, kind fleet.WorkKind) (time.Duration, bool, error) {
	var secs *float64
	err := q.store.db.Gorm.WithContext(ctx).Raw(nextDueStatement(kind)).Scan(&secs).Error
	if err != nil || secs == nil {
		return 0, false, wrapErr("NextDue", string(kind), err)
	}
	return max(0, time.Duration(*secs*float64(time.Second))), true, nil
}
