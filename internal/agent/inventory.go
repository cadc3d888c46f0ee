package agent

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// clusterReport is what the inventory of ManagedClusters does its own way
// in kindSync: a cluster goes as its summary, not its whole body, to the
// inventory endpoint, present ones by name.
type clusterReport struct{ fleet *FleetClient }

func (clusterReport) item(mc *unstructured.Unstructured) (private.ManagedClusterSummary, string) {
	s := summarize(mc)
	return s, agentapi.Summary(s).ContentHash()
}

func (r clusterReport) post(ctx context.Context, b syncBatch[private.ManagedClusterSummary]) (private.InventoryAck, error) {
	batch := private.InventoryBatch{Generation: b.generation, Full: b.full, Last: b.last, Upserts: reports(b.upserts), Deletes: orEmpty(b.deletes)}
	if len(b.present) > 0 {
		present := make([]private.PresentCluster, len(b.present))
		for i, p := range b.present {
			present[i] = private.PresentCluster{Name: p.Key, ContentHash: p.ContentHash}
		}
		batch.Present = &present
	}
	return r.fleet.PostHubInventory(ctx, batch)
}

// newInventory returns the sync of the hub's ManagedClusters. Besides the
// inventory, a change of a registered cluster queues its registration
// status, whose reporter starts once the informer synced; the fleet manager
// may ask for a resync through a.resync.
func (a *Agent) newInventory() *kindSync[private.ManagedClusterSummary] {
	return newKindSync(a, "inventory", a.informer, clusterReport{fleet: a.fleet}, a.metrics.inventoryBatches,
		a.logger.With("component", "inventory"), kindHooks{
			changed: func(key string, mc *unstructured.Unstructured) {
				if a.reporter.registered(mc) {
					a.reporter.queue.add(key)
				}
			},
			synced: func(ctx context.Context) {
				a.live.hubOK(a.clock.Now())
				a.reporter.run(ctx, a.cfg.HeartbeatInterval, a.cfg.ResyncInterval)
			},
			resync: a.resync,
		})
}
