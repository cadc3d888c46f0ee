package agent

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// runResources asks the fleet manager which kinds to sync (retrying until
// it answers or ctx ends), then syncs each with its own informer until ctx
// ends.
func (a *Agent) runResources(ctx context.Context) {
	var kinds []private.ResourceKind
	b := newBackoff()
	for {
		var err error
		if kinds, err = a.fleet.GetHubResourceKinds(ctx); err == nil {
			break
		}
		a.logger.Warn("the kinds to sync were not fetched, will retry", "error", err)
		if !sleep(ctx, b.after(err)) {
			return
		}
	}
	var wg sync.WaitGroup
	for _, k := range kinds {
		s := a.newResourceSync(k)
		if err := s.watch(); err != nil {
			s.logger.Error("informer not watched", "error", err)
			continue
		}
		wg.Go(func() { s.run(ctx, a.cfg.ResyncInterval) })
	}
	wg.Wait()
}

// newResourceSync returns the sync of kind k, its informer not yet started.
// Nothing in it is particular to one kind of the registry.
func (a *Agent) newResourceSync(k private.ResourceKind) *kindSync[private.ResourceObject] {
	gvr := schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
	informer := dynamicinformer.NewFilteredDynamicInformer(a.hub.Dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	return newKindSync(a, "resource", informer, resourceReport{kind: k, fleet: a.fleet},
		a.metrics.resourceBatches.MustCurryWith(prometheus.Labels{"resource": k.Resource}),
		a.logger.With("component", "resources", "resource", k.Resource), kindHooks{})
}

// resourceReport is what a kind of the registry does its own way in
// kindSync: an object goes whole to the resources endpoint, in batches
// named by the kind's group and kind.
type resourceReport struct {
	kind  private.ResourceKind
	fleet *FleetClient
}

func (resourceReport) item(u *unstructured.Unstructured) (private.ResourceObject, string) {
	return resourceObject(u)
}

func (r resourceReport) post(ctx context.Context, b syncBatch[private.ResourceObject]) (private.InventoryAck, error) {
	batch := private.ResourceBatch{Group: r.kind.Group, Kind: r.kind.Kind, Generation: b.generation, Full: b.full, Last: b.last,
		Upserts: reports(b.upserts), Deletes: orEmpty(b.deletes)}
	if len(b.present) > 0 {
		batch.Present = &b.present
	}
	return r.fleet.PostHubResources(ctx, batch)
}

// resourceObject is the report of one object, and its content hash. The body
// goes through JSON, so that the hash is computed on what the fleet
// manager decodes.
func resourceObject(u *unstructured.Unstructured) (private.ResourceObject, string) {
	var body map[string]any
	b, _ := json.Marshal(u.Object) // an object decoded from the API server always marshals
	_ = json.Unmarshal(b, &body)
	ns, uid, rv, gen, labels := u.GetNamespace(), string(u.GetUID()), u.GetResourceVersion(), u.GetGeneration(), u.GetLabels()
	o := private.ResourceObject{Name: u.GetName(), Uid: &uid, ResourceVersion: &rv, Generation: &gen, Body: body}
	if ns != "" {
		o.Namespace = &ns
	}
	if labels != nil {
		o.Labels = &labels
	}
	return o, fleet.ResourceContentHash(body)
}
