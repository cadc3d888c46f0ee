package rest_test

import (
	"encoding/json"
	"testing"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// kubeObjects decodes the objects of a desired set's entry.
func kubeObjects(t testing.TB, raw []json.RawMessage) []private.KubeObject {
	t.Helper()
	out := make([]private.KubeObject, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("objects[%d]: %v", i, err)
		}
	}
	return out
}
