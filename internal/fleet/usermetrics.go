package fleet

import (
	"context"
	"io"
	"time"
)

// MetricsCluster is one cluster of the inventory whose metrics a caller may
// read (docs/user-facing-metrics.md): the same visibility rule as the
// inventory's lists, and what the fleet manager knows of it.
type MetricsCluster struct {
	// ManagedClusterID is the inventory row's id; Name its ManagedCluster's
	// name on its hub; ClusterID its id.openshift.io claim ("" when none).
	ManagedClusterID string
	Name             string
	ClusterID        string
	HubID            string
	// RegistrationID links it to its registration ("" for a cluster of an
	// organisation's own hub that it did not register here); Phase is that
	// registration's phase.
	RegistrationID string
	Phase          Phase
	// OrgID is the organisation the cluster belongs to: its registration's,
	// else its hub's owner.
	OrgID             string
	Available         ConditionStatus
	Joined            ConditionStatus
	OpenShiftVersion  string
	KubernetesVersion string
	Platform          string
	Region            string
	// Capacity and Allocatable are the stored documents (resource name to
	// Kubernetes quantity), undecoded.
	Capacity    StringMapJSON
	Allocatable StringMapJSON
	Stale       bool
	// SharedIdentity is set when a live cluster of another organisation
	// carries the same value of the scope's ClusterLabelSource: a cluster
	// whose claims copy another's must read neither's metrics.
	SharedIdentity bool
}

// MetricsScope names whose clusters a metrics read covers.
type MetricsScope struct {
	Caller Identity
	// Admin reads every organisation's clusters.
	Admin bool
	// RegistrationID, when set, narrows the read to that registration's
	// clusters (none when the caller may not see it).
	RegistrationID string
	// Limit is the most clusters read; a read with more answers
	// CodeMetricsTooManyClusters.
	Limit int
	// ClusterLabelSource names the field that identifies a cluster's
	// series in the metrics backend ("cluster-id": ClusterID, "name": Name),
	// which SharedIdentity is about.
	ClusterLabelSource string
}

// PolicyComplianceState is one cluster's compliance with one policy.
type PolicyComplianceState struct {
	ManagedClusterID string
	PolicyID         string
	PolicyName       string
	// State is Compliant, NonCompliant or Pending, as the hub reports it.
	State string
}

// PhaseCount counts an organisation's registrations in one phase.
type PhaseCount struct {
	OrgID string
	Phase Phase
	Count int
}

// PoolUsage is one capacity pool's size and use.
type PoolUsage struct {
	PoolID        string
	PoolName      string
	OrgID         string
	Clusters      int
	CapacityUnits int64
	ReservedUnits int64
}

// MetricsInventory is what the fleet manager itself knows of a scope's
// clusters, exposed beside their metrics.
type MetricsInventory struct {
	Clusters   []MetricsCluster
	Compliance []PolicyComplianceState
	// Phases and Pools are the organisation's (every organisation's for an
	// admin); for a scope of one registration, they are left empty.
	Phases []PhaseCount
	Pools  []PoolUsage
}

// MetricsStore reads what the user-facing metrics need from the inventory.
type MetricsStore interface {
	// MetricsClusters returns the live clusters of the scope, in a stable
	// order. Errors: CodeNotFound when RegistrationID names no registration
	// the caller may see; CodeMetricsTooManyClusters past scope.Limit.
	MetricsClusters(ctx context.Context, scope MetricsScope) ([]MetricsCluster, error)
	// MetricsInventory returns MetricsClusters and the compliance, phases
	// and pools of the scope. Errors: as MetricsClusters.
	MetricsInventory(ctx context.Context, scope MetricsScope) (MetricsInventory, error)
}

// MetricsCaller is who reads user-facing metrics: an identity, and whether
// it reads every organisation's (a fleet viewer).
type MetricsCaller struct {
	Identity Identity
	Admin    bool
}

// MetricsQuery is a PromQL query with the Prometheus HTTP API's parameters:
// Time for an instant query (zero: now), Start, End and Step for a range
// query (Range).
type MetricsQuery struct {
	Query      string
	Range      bool
	Time       time.Time
	Start, End time.Time
	Step       time.Duration
	Timeout    time.Duration
}

// UserMetrics answers the user-facing metrics endpoints
// (docs/user-facing-metrics.md).
type UserMetrics interface {
	// Admit counts a request against the caller's organisation's rate
	// limit. Errors: CodeRateLimited.
	Admit(c MetricsCaller) error
	// Query runs q confined to the caller's clusters and allow-list and
	// returns the answer in the Prometheus HTTP API's JSON shape. Errors:
	// CodeMetricsQueryRefused, CodeMetricsBackend, CodeMetricsTooManyClusters,
	// CodeNotFound without a backend, CodeUnavailable.
	Query(ctx context.Context, c MetricsCaller, q MetricsQuery) ([]byte, error)
	// WriteText writes the caller's clusters' metrics (one registration's
	// when registrationID is set) in the Prometheus text format. Errors: as
	// MetricsStore's and Query's.
	WriteText(ctx context.Context, c MetricsCaller, registrationID string, w io.Writer) error
}
