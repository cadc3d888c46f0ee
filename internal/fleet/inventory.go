package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// ManagedCluster claims (status.clusterClaims) the inventory reads.
const (
	ClaimID         = "id.openshift.io"
	ClaimVersion    = "version.openshift.io"
	ClaimPlatform   = "platform.open-cluster-management.io"
	ClaimProduct    = "product.open-cluster-management.io"
	ClaimRegion     = "region.open-cluster-management.io"
	ClaimConsoleURL = "consoleurl.cluster.open-cluster-management.io"
)

// ManagedCluster condition types, as RHACM sets them on the hub.
const (
	HubConditionAccepted  = "HubAcceptedManagedCluster"
	HubConditionJoined    = "ManagedClusterJoined"
	HubConditionAvailable = "ManagedClusterConditionAvailable"
)

// ClusterCondition is a ManagedCluster condition as the hub reports it.
type ClusterCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime *time.Time `json:"last_transition_time,omitempty"`
}

// ManagedClusterSummary is what an agent reports of one ManagedCluster.
type ManagedClusterSummary struct {
	Name              string             `json:"name"`
	UID               string             `json:"uid"`
	ResourceVersion   string             `json:"resource_version"`
	Labels            map[string]string  `json:"labels"`
	Claims            map[string]string  `json:"claims"`
	Capacity          map[string]string  `json:"capacity"`
	Allocatable       map[string]string  `json:"allocatable"`
	Conditions        []ClusterCondition `json:"conditions"`
	KubernetesVersion string             `json:"kubernetes_version"`
}

// ConditionStatus returns the status of the hub condition t, Unknown when absent.
func (s ManagedClusterSummary) ConditionStatus(t string) ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			switch ConditionStatus(c.Status) {
			case ConditionTrue, ConditionFalse:
				return ConditionStatus(c.Status)
			}
		}
	}
	return ConditionUnknown
}

// InventoryBatch is one report of an agent: see the private API.
type InventoryBatch struct {
	Generation int64
	Full       bool
	Last       bool
	Upserts    []ManagedClusterSummary
	// Present are clusters reported by name and hash only, unchanged since
	// the fleet manager acknowledged them.
	Present []PresentCluster
	Deletes []string
}

// InventoryResult counts what a batch did.
type InventoryResult struct {
	Written    int
	Unchanged  int
	Deleted    int
	Tombstoned int
	// Confirmed counts present clusters whose hash matched.
	Confirmed int
	// Resend names present clusters whose hash did not match what is
	// stored (or that are not stored): the agent sends them in full.
	Resend []string
	// ContentHashes are the hashes stored for the upserted clusters, by name.
	ContentHashes map[string]string
}

// ManagedClusterPage is a page of the inventory, its total and the change
// feed's position as of the read.
type ManagedClusterPage struct {
	Items []ManagedCluster
	// Total is how many clusters the list has, over all its pages.
	Total int
	// Cursor is the change feed's cursor, read before the page: the feed
	// after it shows every change the page does not.
	Cursor string
}

// ManagedCluster is a cluster of the inventory: one per hub and name.
type ManagedCluster struct {
	ID             string
	Hub            HubRef
	Name           string
	UID            string
	ClusterID      string
	RegistrationID string
	// Labels, Claims, Capacity, Allocatable and Conditions are the stored
	// JSON documents, undecoded (see StringMapJSON).
	Labels            StringMapJSON
	Claims            StringMapJSON
	Capacity          StringMapJSON
	Allocatable       StringMapJSON
	Conditions        ConditionsJSON
	KubernetesVersion string
	OpenShiftVersion  string
	Platform          string
	Product           string
	Region            string
	ConsoleURL        string
	Joined            ConditionStatus
	Available         ConditionStatus
	// Stale is true while the hub is silent: the row is kept, not trusted.
	Stale      bool
	LastSeenAt time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// RegistrationHubStatus is what an agent reports of one registration: the
// hub-side conditions, and the import material once the hub made it.
type RegistrationHubStatus struct {
	RegistrationID  string
	Conditions      Conditions
	ImportManifests *string
}

// DesiredRegistration is one registration's objects for its hub.
type DesiredRegistration struct {
	RegistrationID     string
	Generation         int64
	ManagedClusterName string
	Objects            []map[string]any
	// Failure, when set, is why the objects could not be rendered; the
	// entry goes without them.
	Failure *DeliveryFailure
}

// DesiredSet is everything a hub should hold, at one revision.
type DesiredSet struct {
	HubID    string
	Revision int64
	// RevisionHistory is the history Revision counts in (Hub.RevisionHistory).
	RevisionHistory string
	// BaseRevision, when not 0, makes the set a delta from that revision:
	// Registrations holds the entries published after it, Removed the ids of
	// the registrations withdrawn after it.
	BaseRevision  int64
	Registrations []DesiredRegistration
	Removed       []string
	// Policies are the configuration policies placed on the hub.
	Policies []DesiredPolicy
}

// InventoryService is the inventory: the agents' reports of it and its readers.
type InventoryService interface {
	// IngestInventory stores a batch. Errors: CodeNotFound as for FindAgentHub.
	IngestInventory(ctx context.Context, hubID, agentIdentity string, batch InventoryBatch) (InventoryResult, error)
	// ListManagedClusters returns a page of the inventory the caller may see:
	// all of it for admins, else the clusters of the caller's org's hubs and
	// registrations. Errors: CodeBadSearch, CodeBadOrderBy.
	ListManagedClusters(ctx context.Context, caller Identity, admin bool, q ListQuery) (ManagedClusterPage, error)
	// GetManagedCluster returns one live cluster of the inventory the caller
	// may see, scoped as ListManagedClusters. Errors: CodeNotFound.
	GetManagedCluster(ctx context.Context, caller Identity, admin bool, id string) (ManagedCluster, error)
}

// RevisionWaiter wakes long-polls when a hub's desired set moves.
type RevisionWaiter interface {
	// WaitRevision returns a channel closed at the next change of hub's
	// revision (or a reconnect that may have missed one), and a func that
	// stops waiting.
	WaitRevision(hubID string) (<-chan struct{}, func())
}

// ContentHash fingerprints what the inventory keeps of a summary: everything
// but its resourceVersion, which moves on every status heartbeat of the hub
// without any change the inventory keeps. The agent and the fleet manager
// compute it alike, so an agent can report an unchanged cluster by its name
// and hash alone.
func (s ManagedClusterSummary) ContentHash() string {
	c := s
	c.ResourceVersion = ""
	c.Labels, c.Claims, c.Capacity, c.Allocatable = orEmpty(c.Labels), orEmpty(c.Claims), orEmpty(c.Capacity), orEmpty(c.Allocatable)
	c.Conditions = slices.Clone(c.Conditions)
	if c.Conditions == nil {
		c.Conditions = []ClusterCondition{}
	}
	slices.SortFunc(c.Conditions, func(a, b ClusterCondition) int { return strings.Compare(a.Type, b.Type) })
	for i := range c.Conditions {
		if t := c.Conditions[i].LastTransitionTime; t != nil {
			u := t.UTC().Truncate(time.Second)
			c.Conditions[i].LastTransitionTime = &u
		}
	}
	b, _ := json.Marshal(c) // strings, string maps (sorted keys) and times always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// PresentCluster reports a cluster the agent holds unchanged: its name and
// the ContentHash the fleet manager acknowledged for it.
type PresentCluster struct {
	Name        string
	ContentHash string
}
