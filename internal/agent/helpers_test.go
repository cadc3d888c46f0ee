package agent

import (
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// testLogger logs to stderr under -v, and nowhere otherwise.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fixedClock is a clock that stands still unless moved.
type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// wallClock is the real clock, for tests that run loops.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// fromJSON parses a Kubernetes object written as JSON.
func fromJSON(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatalf("UnmarshalJSON(%s): %v", s, err)
	}
	return u
}

// managedCluster returns a ManagedCluster named name, with labels and the
// given status (a JSON object, or "" for none).
func managedCluster(t testing.TB, name string, labels map[string]string, status string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": name, "uid": "uid-" + name, "resourceVersion": "1"},
		"spec":     map[string]any{"hubAcceptsClient": true},
	}
	if len(labels) > 0 {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		obj["metadata"].(map[string]any)["labels"] = l
	}
	if status != "" {
		var st map[string]any
		if err := json.Unmarshal([]byte(status), &st); err != nil {
			t.Fatalf("status %s: %v", status, err)
		}
		obj["status"] = st
	}
	return &unstructured.Unstructured{Object: obj}
}

func ptr[T any](v T) *T { return &v }
