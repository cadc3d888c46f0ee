package agentapi_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func ptr[T any](v T) *T { return &v }

func TestSummary(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	full := private.ManagedClusterSummary{Name: "a", Uid: ptr("u"), ResourceVersion: ptr("7"), KubernetesVersion: ptr("v1.31"),
		Labels: ptr(map[string]string{"env": "prod"}), Claims: ptr(map[string]string{"id.openshift.io": "x"}),
		Capacity: ptr(map[string]string{"cpu": "8"}), Allocatable: ptr(map[string]string{"cpu": "7"}),
		CreatedAt: &at, // informational: not part of the domain's summary
		Conditions: &[]private.ClusterCondition{{Type: "ManagedClusterConditionAvailable", Status: "True", Reason: ptr("R"), Message: ptr("M"), LastTransitionTime: &at},
			{Type: "HubAcceptedManagedCluster", Status: "True"}}}
	want := fleet.ManagedClusterSummary{Name: "a", UID: "u", ResourceVersion: "7", KubernetesVersion: "v1.31",
		Labels: map[string]string{"env": "prod"}, Claims: map[string]string{"id.openshift.io": "x"},
		Capacity: map[string]string{"cpu": "8"}, Allocatable: map[string]string{"cpu": "7"},
		Conditions: []fleet.ClusterCondition{{Type: "ManagedClusterConditionAvailable", Status: "True", Reason: "R", Message: "M", LastTransitionTime: &at},
			{Type: "HubAcceptedManagedCluster", Status: "True"}}}
	if got := agentapi.Summary(full); !reflect.DeepEqual(got, want) {
		t.Errorf("Summary(full) = %+v, want %+v", got, want)
	}
	if got := agentapi.Summary(private.ManagedClusterSummary{Name: "b"}); !reflect.DeepEqual(got, fleet.ManagedClusterSummary{Name: "b"}) {
		t.Errorf("Summary(name only) = %+v, want the name and zero values", got)
	}
}

func TestObject(t *testing.T) {
	t.Parallel()
	body := map[string]any{"kind": "Policy"}
	got := agentapi.Object(private.ResourceObject{Name: "p", Namespace: ptr("ns"), Uid: ptr("u"), ResourceVersion: ptr("3"),
		Generation: ptr(int64(2)), Labels: ptr(map[string]string{"a": "b"}), Body: body})
	want := fleet.ResourceObject{Namespace: "ns", Name: "p", UID: "u", ResourceVersion: "3", Generation: 2, Labels: map[string]string{"a": "b"}, Body: body}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Object(full) = %+v, want %+v", got, want)
	}
	if got := agentapi.Object(private.ResourceObject{Name: "c"}); !reflect.DeepEqual(got, fleet.ResourceObject{Name: "c"}) {
		t.Errorf("Object(cluster-scoped, name only) = %+v, want the name and zero values", got)
	}
}

// TestResyncBatch: a cluster whose acked hash still holds goes by name and
// hash; a changed or unacked one goes in full.
func TestResyncBatch(t *testing.T) {
	t.Parallel()
	same := private.ManagedClusterSummary{Name: "same", Labels: ptr(map[string]string{"v": "1"})}
	changed := private.ManagedClusterSummary{Name: "changed", Labels: ptr(map[string]string{"v": "2"})}
	fresh := private.ManagedClusterSummary{Name: "fresh"}
	acked := map[string]string{"same": agentapi.Summary(same).ContentHash(), "changed": "stale"}
	b := agentapi.ResyncBatch(9, true, []private.ManagedClusterSummary{same, changed, fresh}, acked)
	if !b.Full || !b.Last || b.Generation != 9 || b.Deletes == nil || len(b.Deletes) != 0 {
		t.Errorf("ResyncBatch() = full %v, last %v, generation %d, deletes %v; want full, last, 9, empty", b.Full, b.Last, b.Generation, b.Deletes)
	}
	var names []string
	for _, u := range b.Upserts {
		names = append(names, u.Name)
	}
	if !reflect.DeepEqual(names, []string{"changed", "fresh"}) {
		t.Errorf("ResyncBatch() upserts = %+v, want changed and fresh", b.Upserts)
	}
	if b.Present == nil || !reflect.DeepEqual(*b.Present, []private.PresentCluster{{Name: "same", ContentHash: acked["same"]}}) {
		t.Errorf("ResyncBatch() present = %v, want same by its hash", b.Present)
	}
	if b := agentapi.ResyncBatch(1, false, []private.ManagedClusterSummary{fresh}, nil); b.Present != nil {
		t.Errorf("ResyncBatch(nothing acked) present = %v, want none", *b.Present)
	}
}
