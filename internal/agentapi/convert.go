// Package agentapi converts what the agents and the fleet manager exchange
// (pkg/api/private's generated types) to the domain's types, for the agent
// that hashes what it reports and the fleet manager that stores it alike. It
// lives here, not in pkg/api/private, because pkg/ is what other modules
// import and imports nothing internal.
package agentapi

import (
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// Summary converts a reported ManagedCluster summary to the domain's.
func Summary(u private.ManagedClusterSummary) fleet.ManagedClusterSummary {
	s := fleet.ManagedClusterSummary{Name: u.Name, UID: deref(u.Uid), ResourceVersion: deref(u.ResourceVersion),
		Labels: derefMap(u.Labels), Claims: derefMap(u.Claims), Capacity: derefMap(u.Capacity),
		Allocatable: derefMap(u.Allocatable), KubernetesVersion: deref(u.KubernetesVersion)}
	if u.Conditions != nil {
		for _, c := range *u.Conditions {
			s.Conditions = append(s.Conditions, fleet.ClusterCondition{Type: c.Type, Status: c.Status, Reason: deref(c.Reason),
				Message: deref(c.Message), LastTransitionTime: c.LastTransitionTime})
		}
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefMap(m *map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return *m
}

// ResyncBatch is one batch of a full resync under generation: a cluster whose
// content hash acked holds, unchanged since, goes by name and hash only
// (present); the others go in full.
func ResyncBatch(generation int64, last bool, clusters []private.ManagedClusterSummary, acked map[string]string) private.InventoryBatch {
	batch := private.InventoryBatch{Generation: generation, Full: true, Last: last, Upserts: []private.ManagedClusterSummary{}, Deletes: []string{}}
	var present []private.PresentCluster
	for _, c := range clusters {
		if h, ok := acked[c.Name]; ok && h == Summary(c).ContentHash() {
			present = append(present, private.PresentCluster{Name: c.Name, ContentHash: h})
			continue
		}
		batch.Upserts = append(batch.Upserts, c)
	}
	if len(present) > 0 {
		batch.Present = &present
	}
	return batch
}

// Object converts a reported object to the domain's.
func Object(o private.ResourceObject) fleet.ResourceObject {
	out := fleet.ResourceObject{Namespace: deref(o.Namespace), Name: o.Name, UID: deref(o.Uid),
		ResourceVersion: deref(o.ResourceVersion), Labels: derefMap(o.Labels), Body: o.Body}
	if o.Generation != nil {
		out.Generation = *o.Generation
	}
	return out
}
