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
