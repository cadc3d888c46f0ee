package hubkind

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ErrUnnamed is the error of an object without metadata.name: readable, but
// nothing the hub can hold.
var ErrUnnamed = errors.New("without a name")

// Decode reads one Kubernetes object from its JSON. The object is as the
// dynamic client sends it: numbers int64 or float64, no Go types. It fails
// when b is not JSON or lacks a kind, and with ErrUnnamed (after the kind)
// when it has no name, so a caller can tell an unreadable object from an
// invalid one.
func Decode(b []byte) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s %w", obj.GetKind(), ErrUnnamed)
	}
	return obj, nil
}

// ToUnstructured converts v, any value that marshals to a Kubernetes
// object's JSON (a rendered map, a typed API object), to the dynamic
// client's form, with Decode's checks and errors.
func ToUnstructured(v any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Decode(b)
}
