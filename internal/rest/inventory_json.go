package rest

import (
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The answers that carry managed clusters are the generated types with the
// clusters' stored JSON documents (labels, claims, capacity, allocatable,
// conditions) written as the database holds them, undecoded: decoding a
// page's maps and encoding them again was over half of its CPU. In each type
// below, the outer field takes the place of the embedded generated type's
// field of the same JSON name (encoding/json's rule for embedded structs), so
// the answer keeps the shape of the OpenAPI document, which the API tests
// validate every answer against.

// managedClusterJSON is a public.ManagedCluster.
type managedClusterJSON struct {
	public.ManagedCluster
	Labels      fleet.StringMapJSON  `json:"labels"`
	Claims      fleet.StringMapJSON  `json:"claims"`
	Capacity    fleet.StringMapJSON  `json:"capacity"`
	Allocatable fleet.StringMapJSON  `json:"allocatable"`
	Conditions  fleet.ConditionsJSON `json:"conditions"`
}

// managedClusterListJSON is a public.ManagedClusterList.
type managedClusterListJSON struct {
	public.ManagedClusterList
	Items []managedClusterJSON `json:"items"`
}

// managedClusterChangeJSON is a public.ManagedClusterChange.
type managedClusterChangeJSON struct {
	public.ManagedClusterChange
	Cluster managedClusterJSON `json:"cluster"`
}

// managedClusterChangeListJSON is a public.ManagedClusterChangeList.
type managedClusterChangeListJSON struct {
	public.ManagedClusterChangeList
	Items []managedClusterChangeJSON `json:"items"`
}

func presentManagedCluster(c fleet.ManagedCluster) managedClusterJSON {
	return managedClusterJSON{
		ManagedCluster: public.ManagedCluster{
			Kind: public.ManagedClusterKindManagedCluster, Id: c.ID, Name: c.Name,
			Hub:       public.HubRef{Id: c.Hub.ID, Name: c.Hub.Name, Zone: c.Hub.Zone, Region: c.Hub.Region},
			ClusterId: strPtr(c.ClusterID), RegistrationId: strPtr(c.RegistrationID), KubernetesVersion: strPtr(c.KubernetesVersion),
			OpenshiftVersion: strPtr(c.OpenShiftVersion), Platform: strPtr(c.Platform), Product: strPtr(c.Product),
			Region: strPtr(c.Region), ConsoleUrl: strPtr(c.ConsoleURL), Joined: public.ManagedClusterJoined(c.Joined),
			Available: public.ManagedClusterAvailable(c.Available), Stale: c.Stale, LastSeenAt: c.LastSeenAt,
			CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		},
		Labels: c.Labels, Claims: c.Claims, Capacity: c.Capacity, Allocatable: c.Allocatable, Conditions: c.Conditions,
	}
}
