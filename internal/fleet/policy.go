package fleet

import (
	"context"
	"time"
)

// The Policy kind the configuration-policy API takes, as the hubs serve it.
const (
	PolicyAPIVersion = "policy.open-cluster-management.io/v1"
	PolicyKind       = "Policy"
	// LabelPolicyID marks the hub objects of one configuration policy, as
	// LabelRegistrationID marks a registration's.
	LabelPolicyID = "fleet-manager.io/policy-id"
	// LabelRootPolicy is what the policy framework puts on the replicated
	// policies it makes in each cluster's namespace.
	LabelRootPolicy = "policy.open-cluster-management.io/root-policy"
)

// ComplianceState is one cluster's compliance with a policy, as the policy
// framework reports it in the root Policy's status.
type ComplianceState string

// The compliance states. A cluster the framework lists without a state yet
// is Pending.
const (
	Compliant    ComplianceState = "Compliant"
	NonCompliant ComplianceState = "NonCompliant"
	Pending      ComplianceState = "Pending"
)

// SelectorOperator is a label selector requirement's operator, as in
// Kubernetes' LabelSelector.
type SelectorOperator string

// The operators of a label selector requirement.
const (
	SelectorIn           SelectorOperator = "In"
	SelectorNotIn        SelectorOperator = "NotIn"
	SelectorExists       SelectorOperator = "Exists"
	SelectorDoesNotExist SelectorOperator = "DoesNotExist"
)

// LabelSelector selects clusters by their labels, with Kubernetes'
// LabelSelector meaning: every match label and every expression must hold.
// An empty selector selects every cluster.
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []LabelSelectorRequirement
}

// LabelSelectorRequirement is one expression of a LabelSelector.
type LabelSelectorRequirement struct {
	Key      string
	Operator SelectorOperator
	Values   []string
}

// Policy is an organisation's configuration policy: a Policy body and the
// fleet-wide placement that says which of the organisation's clusters in
// the policy's zone it applies to.
type Policy struct {
	ID    string
	OrgID string
	Zone  string
	// Name is the body's metadata.name, unique among the organisation's live policies.
	Name string
	// Body is the Policy as stored: apiVersion, kind, metadata (name,
	// labels, annotations) and spec; never status.
	Body       map[string]any
	Selector   LabelSelector
	Generation int64
	CreatedBy  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Hubs is how many hubs hold the policy, as last resolved.
	Hubs int
	// DeliveryFailures are the hubs whose agent could not apply the policy
	// at the revision it last acknowledged, by hub id.
	DeliveryFailures []PolicyDeliveryFailure
}

// PolicyCreate is a request to create a configuration policy.
type PolicyCreate struct {
	Zone     string
	Body     map[string]any
	Selector LabelSelector
}

// PolicyUpdate replaces a policy's body and placement; its zone stays.
type PolicyUpdate struct {
	Body     map[string]any
	Selector LabelSelector
}

// PolicyValidator checks a Policy body against the Policy CRD's schema.
// Errors: CodePolicyInvalid naming each field at fault.
type PolicyValidator interface {
	ValidatePolicy(body map[string]any) error
}

// ClusterCompliance is one cluster's compliance with one policy.
type ClusterCompliance struct {
	PolicyID string
	Hub      HubRef
	// ClusterName is the ManagedCluster's name on its hub.
	ClusterName string
	// ManagedClusterID and RegistrationID are empty when the inventory does
	// not hold the cluster (yet).
	ManagedClusterID string
	RegistrationID   string
	State            ComplianceState
	UpdatedAt        time.Time
}

// ComplianceCounts counts clusters per compliance state.
type ComplianceCounts struct {
	Compliant    int
	NonCompliant int
	Pending      int
}

// Add counts n clusters in state.
func (c *ComplianceCounts) Add(state ComplianceState, n int) {
	switch state {
	case Compliant:
		c.Compliant += n
	case NonCompliant:
		c.NonCompliant += n
	default:
		c.Pending += n
	}
}

// HubCompliance is one hub's counts.
type HubCompliance struct {
	Hub HubRef
	ComplianceCounts
}

// ZoneCompliance is one zone's counts.
type ZoneCompliance struct {
	Zone string
	ComplianceCounts
}

// ComplianceSummary counts the clusters of one policy, or of all an
// organisation's policies, per state, per hub and per zone.
type ComplianceSummary struct {
	ComplianceCounts
	Hubs  []HubCompliance
	Zones []ZoneCompliance
}

// PolicyService keeps configuration policies. Every call is scoped to an
// organisation; another organisation's policy is CodeNotFound.
type PolicyService interface {
	// CreatePolicy stores a validated policy. Errors: CodeValidation,
	// CodeNameTaken, CodeZoneNotServed.
	CreatePolicy(ctx context.Context, caller Identity, create PolicyCreate) (Policy, error)
	ListPolicies(ctx context.Context, org string, q ListQuery) ([]Policy, int, error)
	FindPolicy(ctx context.Context, org, id string) (Policy, error)
	// UpdatePolicy replaces body and placement when match is nil or the
	// policy's generation. Errors: CodePreconditionFailed, CodeNameTaken.
	UpdatePolicy(ctx context.Context, permit Permit, org, id string, match *int64, update PolicyUpdate) (Policy, error)
	// DeletePolicy removes the policy; the hubs drop it at their next revision.
	DeletePolicy(ctx context.Context, permit Permit, org, id string, match *int64) error
	// ListCompliance returns a page of the policy's per-cluster compliance.
	ListCompliance(ctx context.Context, org, policyID string, q ListQuery) ([]ClusterCompliance, int, error)
	// ComplianceSummary counts the clusters of a policy, or of all the
	// organisation's policies when policyID is empty.
	ComplianceSummary(ctx context.Context, org, policyID string) (ComplianceSummary, error)
}
