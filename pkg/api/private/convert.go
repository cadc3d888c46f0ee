package private

import "github.com/fleetmanager/fleet-manager/internal/fleet"

// Summary converts a reported ManagedCluster summary to the domain's, for
// the fleet manager that stores it and the agent that hashes it alike.
func (u ManagedClusterSummary) Summary() fleet.ManagedClusterSummary {
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
func ResyncBatch(generation int64, last bool, clusters []ManagedClusterSummary, acked map[string]string) InventoryBatch {
	batch := InventoryBatch{Generation: generation, Full: true, Last: last, Upserts: []ManagedClusterSummary{}, Deletes: []string{}}
	var present []PresentCluster
	for _, c := range clusters {
		if h, ok := acked[c.Name]; ok && h == c.Summary().ContentHash() {
			present = append(present, PresentCluster{Name: c.Name, ContentHash: h})
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
func (o ResourceObject) Object() fleet.ResourceObject {
	out := fleet.ResourceObject{Namespace: deref(o.Namespace), Name: o.Name, UID: deref(o.Uid),
		ResourceVersion: deref(o.ResourceVersion), Labels: derefMap(o.Labels), Body: o.Body}
	if o.Generation != nil {
		out.Generation = *o.Generation
	}
	return out
}
