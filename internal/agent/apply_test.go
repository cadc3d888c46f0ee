package agent

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
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

func TestDecodeObjects(t *testing.T) {
	t.Parallel()
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"auto-import-secret","namespace":"c1"},"stringData":{"token":"t"},"type":"Opaque"}`
	objs, err := decodeObjects([]json.RawMessage{json.RawMessage(secret)})
	if err != nil || len(objs) != 1 {
		t.Fatalf("decodeObjects(a Secret) = %v, %v", objs, err)
	}
	u := objs[0]
	if u.GetKind() != "Secret" || u.GetNamespace() != "c1" || u.GetName() != "auto-import-secret" || u.Object["type"] != "Opaque" {
		t.Errorf("decodeObjects = %v, want the Secret c1/auto-import-secret with its type", u.Object)
	}
	if tok, _, _ := unstructured.NestedString(u.Object, "stringData", "token"); tok != "t" {
		t.Errorf("decodeObjects stringData.token = %q, want t", tok)
	}
	// Each is the entry's own failure, with a reason for its owner.
	for raw, reason := range map[string]string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{}}`:                  ReasonObjectInvalid,
		`{"apiVersion":"v1","kind":"Namespace","metadata":"not an object"}`:     ReasonObjectInvalid,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}`:         fleet.ReasonObjectUnreadable,
		`{"apiVersion":"v1","metadata":{"name":"no-kind"}}`:                     fleet.ReasonObjectUnreadable,
		`[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a-list"}}]`: fleet.ReasonObjectUnreadable,
	} {
		_, err := decodeObjects([]json.RawMessage{json.RawMessage(secret), json.RawMessage(raw)})
		failure, ok := entryFailure(err)
		if !ok || failure.Reason != reason {
			t.Errorf("decodeObjects(%s) = %v: failure %+v, %v; want the entry's failure %s", raw, err, failure, ok, reason)
		}
	}
}
