package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// hubManagedCluster is a ManagedCluster as a hub serves it, with capacity
// keys beyond cpu and memory.
const hubManagedCluster = `{
  "apiVersion": "cluster.open-cluster-management.io/v1",
  "kind": "ManagedCluster",
  "metadata": {
    "name": "prod-eu-1",
    "uid": "0b7c1c1e-5a3e-4f7e-9a53-3f1f0c0e2a11",
    "resourceVersion": "48213",
    "creationTimestamp": "2026-11-02T10:00:00Z",
    "labels": {"cloud": "Amazon", "vendor": "OpenShift", "fleet-manager.io/registration-id": "r-1"},
    "managedFields": [{"manager": "registration-controller", "operation": "Update"}]
  },
  "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60},
  "status": {
    "allocatable": {"cpu": "11500m", "memory": "47401852Ki", "pods": "750", "core_worker": "12", "socket_worker": "3"},
    "capacity": {"cpu": "12", "memory": "48401852Ki", "pods": "750", "core_worker": "12", "socket_worker": "3", "ephemeral-storage": "1Ti"},
    "clusterClaims": [
      {"name": "id.openshift.io", "value": "5b0e1b9c-ffff-4d2e-8a0a-000000000001"},
      {"name": "version.openshift.io", "value": "4.18.3"},
      {"name": "platform.open-cluster-management.io", "value": "AWS"},
      {"name": "region.open-cluster-management.io", "value": "eu-west-1"},
      {"name": "product.open-cluster-management.io", "value": "OpenShift"}
    ],
    "conditions": [
      {"type": "HubAcceptedManagedCluster", "status": "True", "reason": "HubClusterAdminAccepted", "message": "Accepted by hub cluster admin", "lastTransitionTime": "2026-11-02T10:00:05Z"},
      {"type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined", "message": "Managed cluster joined", "lastTransitionTime": "2026-11-02T10:01:00Z"},
      {"type": "ManagedClusterConditionAvailable", "status": "False", "reason": "ManagedClusterLeaseUpdateStopped", "message": "Registration agent stopped updating its lease.", "lastTransitionTime": "2026-11-03T08:00:00Z"}
    ],
    "version": {"kubernetes": "v1.31.6"}
  }
}`

func TestSummarize(t *testing.T) {
	t.Parallel()
	got := summarize(fromJSON(t, hubManagedCluster))
	ts := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	want := private.ManagedClusterSummary{
		Name:            "prod-eu-1",
		Uid:             ptr("0b7c1c1e-5a3e-4f7e-9a53-3f1f0c0e2a11"),
		ResourceVersion: ptr("48213"),
		CreatedAt:       ts("2026-11-02T10:00:00Z"),
		Labels:          &map[string]string{"cloud": "Amazon", "vendor": "OpenShift", "fleet-manager.io/registration-id": "r-1"},
		Claims: &map[string]string{
			"id.openshift.io": "5b0e1b9c-ffff-4d2e-8a0a-000000000001", "version.openshift.io": "4.18.3",
			"platform.open-cluster-management.io": "AWS", "region.open-cluster-management.io": "eu-west-1",
			"product.open-cluster-management.io": "OpenShift",
		},
		Capacity:    &map[string]string{"cpu": "12", "memory": "48401852Ki", "pods": "750", "core_worker": "12", "socket_worker": "3", "ephemeral-storage": "1Ti"},
		Allocatable: &map[string]string{"cpu": "11500m", "memory": "47401852Ki", "pods": "750", "core_worker": "12", "socket_worker": "3"},
		Conditions: &[]private.ClusterCondition{
			{Type: "HubAcceptedManagedCluster", Status: "True", Reason: ptr("HubClusterAdminAccepted"), Message: ptr("Accepted by hub cluster admin"), LastTransitionTime: ts("2026-11-02T10:00:05Z")},
			{Type: "ManagedClusterJoined", Status: "True", Reason: ptr("ManagedClusterJoined"), Message: ptr("Managed cluster joined"), LastTransitionTime: ts("2026-11-02T10:01:00Z")},
			{Type: "ManagedClusterConditionAvailable", Status: "False", Reason: ptr("ManagedClusterLeaseUpdateStopped"), Message: ptr("Registration agent stopped updating its lease."), LastTransitionTime: ts("2026-11-03T08:00:00Z")},
		},
		KubernetesVersion: ptr("v1.31.6"),
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("summarize(prod-eu-1) =\n%s\nwant\n%s", g, w)
	}
}

func TestSummarizeQuantities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string // status.capacity as JSON
		want map[string]string
	}{
		{"canonical form", `{"cpu": "1000m", "memory": "1024Mi"}`, map[string]string{"cpu": "1", "memory": "1Gi"}},
		{"numbers", `{"pods": 250, "core_worker": 8}`, map[string]string{"pods": "250", "core_worker": "8"}},
		{"not a quantity is kept as it is", `{"gpu-model": "A100 80GB"}`, map[string]string{"gpu-model": "A100 80GB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := summarize(managedCluster(t, "c", nil, `{"capacity": `+tt.raw+`}`))
			if got.Capacity == nil || !reflect.DeepEqual(*got.Capacity, tt.want) {
				t.Errorf("summarize(capacity %s).Capacity = %v, want %v", tt.raw, got.Capacity, tt.want)
			}
		})
	}
}

func TestSummarizeMinimal(t *testing.T) {
	t.Parallel()
	got := summarize(managedCluster(t, "bare", nil, ""))
	want := private.ManagedClusterSummary{Name: "bare", Uid: ptr("uid-bare"), ResourceVersion: ptr("1")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("summarize(bare) = %+v, want %+v", got, want)
	}
	// What the API requires is there; what it bounds is bounded.
	huge := managedCluster(t, "big", nil, `{"conditions": [`+strings.Repeat(`{"type": "T", "status": "True", "message": "`+strings.Repeat("x", 40000)+`"},`, 70)+`{"type": "Last", "status": "True"}]}`)
	s := summarize(huge)
	if n := len(*s.Conditions); n != maxConditions {
		t.Errorf("summarize(71 conditions): %d conditions, want %d", n, maxConditions)
	}
	if n := len(*(*s.Conditions)[0].Message); n != maxMessage {
		t.Errorf("summarize(40000-byte message): message of %d bytes, want %d", n, maxMessage)
	}
}
