package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"
	"time"
)

// ResourceObject is one object of a generic kind as an agent reports it.
// Body is the whole object as JSON decodes it, managed fields left out.
type ResourceObject struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	Generation      int64
	Labels          map[string]string
	Body            map[string]any
}

// Key is the object's key in a batch: "namespace/name", or the name of a
// cluster-scoped object (the informer's key).
func (o ResourceObject) Key() string { return ResourceKey(o.Namespace, o.Name) }

// ResourceKey returns the key of the object namespace/name.
func ResourceKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitResourceKey returns the namespace and name of a key.
func SplitResourceKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}

// ResourceContentHash fingerprints an object's body without what moves on
// every write of the object (metadata.resourceVersion, managedFields), so
// that the agent and the fleet manager, computing it alike on the body as
// JSON decodes it, can tell an unchanged object by its hash.
func ResourceContentHash(body map[string]any) string {
	c := maps.Clone(body)
	if md, ok := c["metadata"].(map[string]any); ok {
		md = maps.Clone(md)
		delete(md, "resourceVersion")
		delete(md, "managedFields")
		c["metadata"] = md
	}
	b, _ := json.Marshal(c) // a decoded JSON value always marshals, maps by sorted key
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ResourceBatch is one report of an agent for one kind: see the private API.
// Present and Deletes name objects by key; InventoryResult answers it, with
// keys for names.
type ResourceBatch struct {
	Group      string
	Kind       string
	Generation int64
	Full       bool
	Last       bool
	Upserts    []ResourceObject
	Present    []PresentCluster
	Deletes    []string
}

// Resource is a live object of a generic kind, on one hub.
type Resource struct {
	ID              string
	Hub             HubRef
	Zone            string
	Group           string
	Version         string
	Kind            string
	Namespace       string
	Name            string
	ClusterName     string
	UID             string
	ResourceVersion string
	Generation      int64
	Labels          map[string]string
	Body            map[string]any
	ContentHash     string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// ResourceQuery selects a page of one kind's live objects.
type ResourceQuery struct {
	Kind      ResourceKind
	HubID     string
	Namespace string
	ListQuery
}

// ResourceService is the generic path of the inventory: the agents' side
// and the administrators' read.
type ResourceService interface {
	// ListAgentKinds returns the kinds the hub's agent is to sync. Errors:
	// CodeNotFound as for FindAgentHub.
	ListAgentKinds(ctx context.Context, hubID, agentIdentity string) ([]ResourceKind, error)
	// IngestResources stores a batch of one kind. Errors: CodeNotFound as
	// for FindAgentHub, CodeValidation for a kind not in the registry.
	IngestResources(ctx context.Context, hubID, agentIdentity string, batch ResourceBatch) (InventoryResult, error)
	// ListResources returns a page of one kind's live objects of live hubs.
	// Errors: CodeBadSearch, CodeBadOrderBy.
	ListResources(ctx context.Context, q ResourceQuery) ([]Resource, int, error)
	// FindResource returns one live object of a live hub, as ListResources
	// shows it. Errors: CodeNotFound.
	FindResource(ctx context.Context, id string) (Resource, error)
	// ResourceChangeFeed follows a kind's changes.
	ResourceChangeFeed
}
