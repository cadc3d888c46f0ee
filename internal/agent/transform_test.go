package agent

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// TestDropManagedFields checks that the informer stores objects without
// their managed fields, and that the transform can no longer be set once the
// informer runs (run and Run then stop instead of storing them whole).
func TestDropManagedFields(t *testing.T) {
	t.Parallel()
	gvr := hubkind.Placement.GVR()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("cluster.open-cluster-management.io/v1beta1")
	obj.SetKind("Placement")
	obj.SetNamespace("ns")
	obj.SetName("p")
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}})
	dyn := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "PlacementList"}, obj)
	informer := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, "", 0, cache.Indexers{}, nil).Informer()
	if err := dropManagedFields(informer); err != nil {
		t.Fatalf("dropManagedFields(new informer) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { informer.RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	stored, ok, err := informer.GetStore().GetByKey("ns/p")
	if err != nil || !ok {
		t.Fatalf("GetByKey(ns/p) = %v, %v, %v", stored, ok, err)
	}
	if mf := stored.(*unstructured.Unstructured).GetManagedFields(); mf != nil {
		t.Errorf("stored object's managed fields = %v, want none", mf)
	}
	if err := dropManagedFields(informer); err == nil {
		t.Error("dropManagedFields(running informer) = nil, want an error")
	}
}
