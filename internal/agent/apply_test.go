package agent

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func TestDeletionWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 10 * time.Minute
	tests := []struct {
		name  string
		began []time.Time
		want  time.Duration
	}{
		{"deleted now: the whole timeout", []time.Time{now}, timeout},
		{"deleted 4 minutes ago: the rest", []time.Time{now.Add(-4 * time.Minute)}, 6 * time.Minute},
		{"stuck past its timeout: one look", []time.Time{now.Add(-time.Hour)}, 0},
		{"one stuck, one new: the new one's", []time.Time{now.Add(-time.Hour), now}, timeout},
		{"a clock ahead of the hub's never waits longer than the timeout", []time.Time{now.Add(time.Hour)}, timeout},
	}
	for _, tt := range tests {
		if got := deletionWait(now, timeout, tt.began); got != tt.want {
			t.Errorf("deletionWait(%s) = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestToUnstructured(t *testing.T) {
	t.Parallel()
	o := private.KubeObject{ApiVersion: "v1", Kind: "Secret", Metadata: map[string]any{"name": "auto-import-secret", "namespace": "c1"},
		AdditionalProperties: map[string]any{"stringData": map[string]any{"token": "t"}, "type": "Opaque"}}
	u, err := toUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Secret" || u.GetNamespace() != "c1" || u.GetName() != "auto-import-secret" || u.Object["type"] != "Opaque" {
		t.Errorf("toUnstructured = %v, want the Secret c1/auto-import-secret with its type", u.Object)
	}
	if tok, _, _ := unstructured.NestedString(u.Object, "stringData", "token"); tok != "t" {
		t.Errorf("toUnstructured stringData.token = %q, want t", tok)
	}
	if _, err := toUnstructured(private.KubeObject{ApiVersion: "v1", Kind: "Namespace", Metadata: map[string]any{}}); err == nil {
		t.Errorf("toUnstructured(no name) = nil error, want one")
	}
}
