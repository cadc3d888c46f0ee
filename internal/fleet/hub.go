package fleet

import (
	"context"
	"slices"
	"time"
)

// DeliveryMode is how a hub receives its registrations' objects.
type DeliveryMode string

// The delivery modes (ARCHITECTURE.md sections 5 and 6).
const (
	DeliveryAgent       DeliveryMode = "agent"
	DeliverySyncSetOCM  DeliveryMode = "syncset-ocm"
	DeliverySyncSetHive DeliveryMode = "syncset-hive"
)

// DeliveryModes lists every delivery mode.
func DeliveryModes() []DeliveryMode {
	return []DeliveryMode{DeliveryAgent, DeliverySyncSetOCM, DeliverySyncSetHive}
}

// Hub conditions and reasons.
const (
	ConditionHubReady       = "Ready"
	ReasonHeartbeatFresh    = "HeartbeatReceived"
	ReasonHeartbeatTimeout  = "HeartbeatTimeout"
	ReasonAwaitingHeartbeat = "AwaitingFirstHeartbeat"
	ReasonNoAgentNeeded     = "DeliveredBySyncSet"
)

// Hub is an RHACM hub the fleet manager may place registrations on.
type Hub struct {
	ID            string
	Name          string
	Zone          string
	Region        string
	CloudProvider string
	DeliveryMode  DeliveryMode
	// Capacity is the most registrations the hub takes.
	Capacity int
	// AgentIdentity is the agent-identity claim its fleetshard-sync carries.
	AgentIdentity string
	// OwnerOrgID makes the hub customer-managed: all its clusters are that org's.
	OwnerOrgID string
	// OCM and Hive name where a SyncSet hub's SyncSets go.
	OCM            *OCMTarget
	Hive           *HiveTarget
	Cordoned       bool
	HasCredentials bool
	Conditions     Conditions
	PlacedCount    int
	// Revision moves whenever the hub's desired set changes.
	Revision int64
	// AppliedRevision is the last revision its agent reported applied.
	AppliedRevision int64
	// RevisionHistory names the database history Revision counts in; it
	// changes when the database is restored to an earlier point or a
	// standby takes over, so an agent knows revisions it holds from before
	// are not comparable (docs/agent.md). Set on the agents' reads only.
	RevisionHistory string
	LastHeartbeatAt *time.Time
	AgentVersion    string
	// AgentCapacity is the hub's capacity as its agent reports it.
	AgentCapacity map[string]string
	// ResyncRequested asks the agent for a full inventory resync: it
	// restarted, or the hub was silent and its inventory went stale.
	ResyncRequested bool
	// InventoryStale is true while the hub is silent: its clusters are kept
	// but not trusted.
	InventoryStale bool
	// LastInventoryAt is when its agent last sent an inventory batch.
	LastInventoryAt *time.Time
	Generation      int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// HubCreate is what an SRE registers.
type HubCreate struct {
	Name          string
	Zone          string
	Region        string
	CloudProvider string
	DeliveryMode  DeliveryMode
	Capacity      int
	AgentIdentity string
	OwnerOrgID    string
	OCM           *OCMTarget
	Hive          *HiveTarget
	// Credentials for SyncSet delivery; write-only, stored encrypted.
	Credentials map[string]string
}

// HubUpdate changes a hub; nil fields are left alone.
type HubUpdate struct {
	Region        *string
	CloudProvider *string
	DeliveryMode  *DeliveryMode
	Capacity      *int
	AgentIdentity *string
	OwnerOrgID    *string
	OCM           *OCMTarget
	Hive          *HiveTarget
	Credentials   *map[string]string
}

// Validate checks a hub registration; errors carry CodeValidation.
func (c HubCreate) Validate() error {
	if !dnsLabel.MatchString(c.Name) {
		return Errorf(CodeValidation, "name must be a DNS label")
	}
	if !regionOrZone.MatchString(c.Zone) {
		return Errorf(CodeValidation, "zone must be a DNS label")
	}
	if !regionOrZone.MatchString(c.Region) {
		return Errorf(CodeValidation, "region must be a DNS label")
	}
	if err := validateHubFields(c.DeliveryMode, c.Capacity, c.AgentIdentity); err != nil {
		return err
	}
	return validateTargets(c.DeliveryMode, c.OCM, c.Hive, c.Credentials, false)
}

// Validate checks an update against the hub it changes.
func (u HubUpdate) Validate(current Hub) error {
	if u.Region != nil && !regionOrZone.MatchString(*u.Region) {
		return Errorf(CodeValidation, "region must be a DNS label")
	}
	mode, capacity, identity := current.DeliveryMode, current.Capacity, current.AgentIdentity
	if u.DeliveryMode != nil {
		mode = *u.DeliveryMode
	}
	if u.Capacity != nil {
		capacity = *u.Capacity
		if capacity < current.PlacedCount {
			return Errorf(CodeValidation, "capacity %d is below the %d registrations placed on the hub", capacity, current.PlacedCount)
		}
	}
	if u.AgentIdentity != nil {
		identity = *u.AgentIdentity
	}
	if err := validateHubFields(mode, capacity, identity); err != nil {
		return err
	}
	ocm, hive := current.OCM, current.Hive
	if u.OCM != nil {
		ocm = u.OCM
	}
	if u.Hive != nil {
		hive = u.Hive
	}
	var creds map[string]string
	if u.Credentials != nil {
		creds = *u.Credentials
		if len(creds) == 0 && mode != DeliveryAgent {
			return Errorf(CodeValidation, "credentials of a %s hub cannot be removed", mode)
		}
	}
	if u.Credentials != nil && len(creds) == 0 {
		creds = nil
	}
	if err := validateTargets(mode, ocm, hive, creds, current.HasCredentials); err != nil {
		return err
	}
	if current.DeliveryMode == DeliverySyncSetOCM && mode != current.DeliveryMode && current.PlacedCount > 0 {
		return Errorf(CodeHubInUse, "a syncset-ocm hub with %d registrations placed cannot change its delivery mode: "+
			"OCM cannot delete a SyncSet and leave its objects, so the move would remove the clusters from the hub", current.PlacedCount)
	}
	return nil
}

func validateHubFields(mode DeliveryMode, capacity int, identity string) error {
	if !slices.Contains(DeliveryModes(), mode) {
		return Errorf(CodeValidation, "delivery_mode %q is not one of %v", mode, DeliveryModes())
	}
	if capacity < 0 || capacity > 1_000_000 {
		return Errorf(CodeValidation, "capacity must be between 0 and 1000000 (got %d)", capacity)
	}
	if mode == DeliveryAgent && identity == "" {
		return Errorf(CodeValidation, "agent_identity is required for delivery_mode agent")
	}
	return nil
}

// HubService is the SREs' register of hubs.
type HubService interface {
	// CreateHub registers a hub. Errors: CodeValidation, CodeNameTaken, CodeHubIdentityTaken.
	CreateHub(ctx context.Context, create HubCreate) (Hub, error)
	// FindHub returns a live hub. Errors: CodeNotFound.
	FindHub(ctx context.Context, id string) (Hub, error)
	// ListHubs returns a page of hubs and their total. Errors: CodeBadSearch, CodeBadOrderBy.
	ListHubs(ctx context.Context, q ListQuery) ([]Hub, int, error)
	// UpdateHub changes a hub; ifMatch, when not nil, must be its generation.
	// Errors: CodeNotFound, CodeValidation, CodePreconditionFailed, CodeHubIdentityTaken.
	UpdateHub(ctx context.Context, id string, ifMatch *int64, update HubUpdate) (Hub, error)
	// SetHubCordoned stops (or resumes) new placements on a hub. Errors: CodeNotFound.
	SetHubCordoned(ctx context.Context, id string, cordoned bool) (Hub, error)
	// DeleteHub removes a hub with no registrations placed on it.
	// Errors: CodeNotFound, CodeHubInUse.
	DeleteHub(ctx context.Context, id string) error
}

// HubHeartbeat is what a hub's agent reports with each status call.
type HubHeartbeat struct {
	AgentVersion         string
	AgentStartGeneration int64
	// AppliedRevision acknowledges the desired set the agent has applied.
	AppliedRevision int64
	Capacity        map[string]string
	Conditions      Conditions
	// Failures are the entries of the applied revision the hub did not take,
	// when FailuresReported; an agent that does not report them leaves the
	// recorded ones as they are.
	Failures         []DeliveryFailure
	FailuresReported bool
}

// AgentService is what fleetshard-sync agents call.
type AgentService interface {
	// FindAgentHub returns the hub bound to the agent identity. Errors:
	// CodeNotFound when hubID is not that hub (its existence is not revealed).
	FindAgentHub(ctx context.Context, hubID, agentIdentity string) (Hub, error)
	// RecordHubHeartbeat stores an agent's status report and acknowledgement.
	// Errors: CodeNotFound as for FindAgentHub.
	RecordHubHeartbeat(ctx context.Context, hubID, agentIdentity string, hb HubHeartbeat) (Hub, error)
	// DesiredSet returns the hub's desired set. Errors: CodeNotFound as for FindAgentHub.
	DesiredSet(ctx context.Context, hubID, agentIdentity string) (DesiredSet, error)
	// DesiredChanges returns what changed in the hub's desired set since
	// revision since, whose whole set the agent holds: a delta when since is
	// from 1 to the hub's revision, else (0 among them) the full set. Errors: as DesiredSet.
	DesiredChanges(ctx context.Context, hubID, agentIdentity string, since int64) (DesiredSet, error)
	// RecordRegistrationStatus stores the hub's view of its registrations and
	// returns how many it updated; registrations not placed on the hub are
	// ignored. Errors: CodeNotFound as for FindAgentHub.
	RecordRegistrationStatus(ctx context.Context, hubID, agentIdentity string, items []RegistrationHubStatus) (int, error)
}
