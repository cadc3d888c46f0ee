package hubkind_test

import (
	"errors"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	obj, err := hubkind.Decode([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"},"spec":{"n":3,"f":1.5}}`))
	if err != nil {
		t.Fatalf("Decode(a Secret) = %v", err)
	}
	if !hubkind.Secret.Is(obj) || obj.GetNamespace() != "ns" || obj.GetName() != "s" {
		t.Errorf("Decode(a Secret) = %v, want the Secret ns/s", obj.Object)
	}
	spec := obj.Object["spec"].(map[string]any)
	if _, ok := spec["n"].(int64); !ok {
		t.Errorf("Decode: spec.n is %T, want int64 as the dynamic client sends it", spec["n"])
	}
	if _, ok := spec["f"].(float64); !ok {
		t.Errorf("Decode: spec.f is %T, want float64", spec["f"])
	}

	for _, tc := range []struct {
		raw     string
		unnamed bool
	}{
		{raw: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, unnamed: true},
		{raw: `{"apiVersion":"v1","metadata":{"name":"no-kind"}}`},
		{raw: `[1,2]`},
		{raw: `{"apiVersion":`},
	} {
		obj, err := hubkind.Decode([]byte(tc.raw))
		if err == nil || obj != nil {
			t.Errorf("Decode(%s) = %v, %v; want an error", tc.raw, obj, err)
			continue
		}
		if errors.Is(err, hubkind.ErrUnnamed) != tc.unnamed {
			t.Errorf("Decode(%s) = %v; errors.Is(ErrUnnamed) = %v, want %v", tc.raw, err, !tc.unnamed, tc.unnamed)
		}
	}
	if _, err := hubkind.Decode([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`)); err.Error() != "ConfigMap without a name" {
		t.Errorf("Decode(an unnamed ConfigMap) = %q, want %q", err, "ConfigMap without a name")
	}
}

func TestToUnstructured(t *testing.T) {
	t.Parallel()
	type typed struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
	}
	for _, v := range []any{
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "n"}, "spec": map[string]any{"n": 3}},
		typed{APIVersion: "v1", Kind: "Namespace", Metadata: map[string]string{"name": "n"}},
	} {
		obj, err := hubkind.ToUnstructured(v)
		if err != nil || !hubkind.Namespace.Is(obj) || obj.GetName() != "n" {
			t.Errorf("ToUnstructured(%#v) = %v, %v; want the Namespace n", v, obj, err)
			continue
		}
		if spec, ok := obj.Object["spec"].(map[string]any); ok {
			if _, ok := spec["n"].(int64); !ok {
				t.Errorf("ToUnstructured: spec.n is %T, want int64 (an int is not JSON-clean)", spec["n"])
			}
		}
	}
	if obj, err := hubkind.ToUnstructured(map[string]any{"apiVersion": "v1", "kind": "Namespace", "c": make(chan int)}); err == nil {
		t.Errorf("ToUnstructured(a channel) = %v, want an error", obj)
	}
	if _, err := hubkind.ToUnstructured(map[string]any{"apiVersion": "v1", "kind": "Secret"}); !errors.Is(err, hubkind.ErrUnnamed) {
		t.Errorf("ToUnstructured(an unnamed Secret) = %v, want ErrUnnamed", err)
	}
}

func TestKindMethods(t *testing.T) {
	t.Parallel()
	if got := hubkind.Secret.APIVersion(); got != "v1" {
		t.Errorf("Secret.APIVersion() = %q, want v1", got)
	}
	if got := hubkind.SyncSet.APIVersion(); got != "hive.openshift.io/v1" {
		t.Errorf("SyncSet.APIVersion() = %q, want hive.openshift.io/v1", got)
	}
	if got := hubkind.ClusterSync.GVR().String(); got != "hiveinternal.openshift.io/v1alpha1, Resource=clustersyncs" {
		t.Errorf("ClusterSync.GVR() = %q", got)
	}
	ss := hubkind.SyncSet.New("ns", "s")
	if !hubkind.SyncSet.Is(ss) || ss.GetNamespace() != "ns" || ss.GetName() != "s" {
		t.Errorf("SyncSet.New(ns, s) = %v", ss.Object)
	}
	ns := hubkind.Namespace.New("", "n")
	if _, has := ns.Object["metadata"].(map[string]any)["namespace"]; has || hubkind.Secret.Is(ns) {
		t.Errorf("Namespace.New(\"\", n) = %v: a namespace field, or taken for a Secret", ns.Object)
	}
	other := hubkind.Secret.New("ns", "s")
	other.SetAPIVersion("example.com/v1")
	if hubkind.Secret.Is(other) {
		t.Errorf("Secret.Is(an example.com/v1 Secret) = true, want false")
	}
}
