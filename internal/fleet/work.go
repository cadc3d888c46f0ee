package fleet

import (
	"context"
	"time"
)

// WorkKind names a reconciler's queue of registrations.
type WorkKind string

// The registration work queues.
const (
	// WorkProvision is registrations to place and deliver (provisioning_mgr).
	WorkProvision WorkKind = "provision"
	// WorkDeprovision is registrations to take off their hub (deleting_mgr).
	WorkDeprovision WorkKind = "deprovision"
)

// Claim is a registration a reconciler holds until its lease ends.
type Claim struct {
	Registration Registration
	// Token names the claim (one per claimed batch): the queue places the
	// registration, records the outcome or frees it only while the row
	// still holds this token, so a pass whose lease ran out cannot
	// overwrite the next claimant's work, even one of the same process.
	Token string
	// Attempts counts failed passes since the last success.
	Attempts int
	// DeletionAge is how long ago deregistration was asked for, by the
	// database's clock (zero when it was not).
	DeletionAge time.Duration
}

// Outcome is what one reconcile pass decided for a claimed registration:
// its new status, and when it needs another pass.
type Outcome struct {
	ID                 string
	Conditions         Conditions
	ObservedGeneration int64
	// RequeueAfter asks for another pass after this long; 0 waits for a wake-up
	// or the periodic resync.
	RequeueAfter time.Duration
	// Err records a failed pass: the queue backs off exponentially.
	Err error
	// Delete soft-deletes the registration and frees its hub's capacity.
	Delete bool
	// DeliveredVia, when set, records the delivery mode that now holds the
	// registration's objects.
	DeliveredVia DeliveryMode
}

// DeliveryReport says whether a delivery step is done on the hub.
type DeliveryReport struct {
	// Done is true when the hub holds the objects (Deliver) or confirmed their
	// removal (Withdraw).
	Done    bool
	Reason  string
	Message string
	// NoAgent is true when nothing on the hub reports the cluster's state
	// back (SyncSet delivery): Joined and Available cannot be known.
	NoAgent bool
}

// Delivery puts a registration's objects on a hub and takes them off. There is
// one implementation per delivery mode; the reconcilers do not branch on it.
type Delivery interface {
	// Deliver makes hub hold reg's current objects; calling it again for an
	// unchanged registration changes nothing.
	Deliver(ctx context.Context, hub Hub, reg Registration) (DeliveryReport, error)
	// Withdraw removes reg's objects from hub; calling it again is harmless.
	Withdraw(ctx context.Context, hub Hub, reg Registration) (DeliveryReport, error)
}

// DeliveryResult is one registration's part of a batch delivery.
type DeliveryResult struct {
	Report DeliveryReport
	// Err is this registration's failure alone: CodeConflict when it is not
	// placed on the hub.
	Err error
}

// BatchDelivery is a Delivery that delivers many registrations of one hub
// at once, at the cost of one: the agent delivery publishes them all in one
// revision of the hub's desired set. provisioning_mgr uses it where a
// hub's delivery offers it, and Deliver one registration at a time where not.
type BatchDelivery interface {
	Delivery
	// DeliverBatch does what Deliver does for each of regs, all placed on
	// hub, and returns one result per registration, in order. The error is
	// for the whole batch.
	DeliverBatch(ctx context.Context, hub Hub, regs []Registration) ([]DeliveryResult, error)
}

// Placement is where a batch placement put one claimed registration.
type Placement struct {
	// ID is the registration's.
	ID string
	// Hub is the hub the registration is placed on, now or before; nil when
	// no hub qualifies.
	Hub *Hub
	// Err is this registration's failure: CodeConflict when its claim was
	// lost (nothing was placed), else the failure of its zone's transaction.
	Err error
}

// Completion is a pass's outcome for the claim named by Token (Claim.Token).
type Completion struct {
	Token   string
	Outcome Outcome
}

// RegistrationQueue is the reconcilers' view of the registrations.
type RegistrationQueue interface {
	// ClaimRegistrations leases up to limit registrations due for work of
	// kind. On an error, the claims it returns (ID and Token only) are those
	// it may still hold, for ReleaseRegistrations.
	ClaimRegistrations(ctx context.Context, kind WorkKind, owner string, limit int, lease time.Duration) ([]Claim, error)
	// ReleaseRegistrations frees those of ids that still hold the claim named
	// by token, due again at once, recording nothing; it returns how many.
	ReleaseRegistrations(ctx context.Context, token string, ids []string) (int, error)
	// PlaceRegistrations chooses a hub for each claimed registration not
	// placed yet, among the hubs whose delivery mode is in modes, and returns
	// one Placement per claim, in order. The claims of one zone are placed
	// together, each seeing the others' load; a claim that was lost places
	// nothing. The error is for the whole batch; the Placements carry each
	// registration's own.
	PlaceRegistrations(ctx context.Context, claims []Claim, modes []DeliveryMode) ([]Placement, error)
	// FindHub returns a live hub. Errors: CodeNotFound.
	FindHub(ctx context.Context, id string) (Hub, error)
	// CompleteRegistration records a pass's outcome and releases the claim
	// named by token (Claim.Token); false when the row no longer holds that
	// claim (the outcome is dropped).
	CompleteRegistration(ctx context.Context, token string, out Outcome) (bool, error)
	// CompleteRegistrations records a batch of outcomes at once, each as
	// CompleteRegistration does; kept[i] is false when the row no longer
	// holds done[i]'s claim. Outcomes that delete (Outcome.Delete) are
	// refused: CodeValidation.
	CompleteRegistrations(ctx context.Context, done []Completion) (kept []bool, err error)
	// NextDue returns how long until the next registration of kind is due, and
	// false when none is scheduled.
	NextDue(ctx context.Context, kind WorkKind) (time.Duration, bool, error)
	// WakeAcknowledged makes due, ahead of other work, at most limit
	// registrations whose delivery or withdrawal a hub's agent acknowledged
	// since they were last woken; more is true while acknowledged ones
	// remain.
	WakeAcknowledged(ctx context.Context, limit int) (woken int, more bool, err error)
}

// HubLiveness is a hub with the freshness of its last heartbeat, judged by the
// database's clock.
type HubLiveness struct {
	Hub            Hub
	HeartbeatFresh bool
}

// HubMonitor is hub_mgr's view of the hubs.
type HubMonitor interface {
	// ListHubLiveness returns every live hub.
	ListHubLiveness(ctx context.Context) ([]HubLiveness, error)
	// SetHubReadyCondition sets a hub's Ready condition, leaving the others
	// (its agent's) as they are.
	SetHubReadyCondition(ctx context.Context, id string, ready Condition) error
	// MarkInventoryStale flags a silent hub's inventory as stale (kept, not
	// trusted) and asks its agent for a full resync when it returns.
	MarkInventoryStale(ctx context.Context, hubID string) error
	// RequeueUnplaced wakes unplaced registrations waiting in zones where a
	// ready hub (with a delivery mode in modes) has room, at most limit a
	// zone; it returns how many.
	RequeueUnplaced(ctx context.Context, modes []DeliveryMode, limit int) (int, error)
}

// FleetStats are gauges of the fleet.
type FleetStats struct {
	// QueueDepth counts registrations due for work, per kind.
	QueueDepth map[WorkKind]int
	// Phases counts live registrations per phase.
	Phases map[Phase]int
}
