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
	// Token names this one claim: the queue places the registration and
	// records the outcome only while the row still holds this token, so a
	// pass whose lease ran out cannot overwrite the next claimant's work,
	// even one of the same process.
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

// RegistrationQueue is the reconcilers' view of the registrations.
type RegistrationQueue interface {
	// ClaimRegistrations leases up to limit registrations due for work of kind.
	ClaimRegistrations(ctx context.Context, kind WorkKind, owner string, limit int, lease time.Duration) ([]Claim, error)
	// PlaceRegistration chooses a hub for a claimed registration (token:
	// Claim.Token) among those whose delivery mode is in modes; nil when no
	// hub has room. Errors: CodeConflict when the claim was lost.
	PlaceRegistration(ctx context.Context, id, token string, modes []DeliveryMode) (*Hub, error)
	// FindHub returns a live hub. Errors: CodeNotFound.
	FindHub(ctx context.Context, id string) (Hub, error)
	// CompleteRegistration records a pass's outcome and releases the claim
	// named by token (Claim.Token); false when the row no longer holds that
	// claim (the outcome is dropped).
	CompleteRegistration(ctx context.Context, token string, out Outcome) (bool, error)
	// NextDue returns how long until the next registration of kind is due, and
	// false when none is scheduled.
	NextDue(ctx context.Context, kind WorkKind) (time.Duration, bool, error)
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
	// RequeueUnplaced wakes unplaced registrations of zones where a ready hub
	// (with a delivery mode in modes) has room; it returns how many.
	RequeueUnplaced(ctx context.Context, modes []DeliveryMode) (int, error)
}

// FleetStats are gauges of the fleet.
type FleetStats struct {
	// QueueDepth counts registrations due for work, per kind.
	QueueDepth map[WorkKind]int
	// Phases counts live registrations per phase.
	Phases map[Phase]int
}
