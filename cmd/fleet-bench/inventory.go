package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// clusterVersions are the OpenShift version a simulated cluster reports, before
// and after the changes scenario.
var clusterVersions = [2]string{"4.16.12", "4.16.13"}

// summaryEpoch anchors the simulated clusters' timestamps, so that every
// resync reports the same content.
var summaryEpoch = time.Date(2026, 1, 10, 8, 0, 0, 0, time.UTC)

// clusterSummary is cluster i of hub as a real agent would summarize its
// ManagedCluster: 5 labels, 8 claims, 5 capacity and allocatable keys, the 3
// registration conditions and the Kubernetes version. variant picks the
// OpenShift version.
func clusterSummary(hub, i, variant int) private.ManagedClusterSummary {
	name := fmt.Sprintf("cluster-%03d-%05d", hub, i)
	id := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", hub*100000+i, hub, i%4096, hub%4096, i)
	version, kube := clusterVersions[variant], "v1.29.8+f10c92d"
	console := "https://console-openshift-console.apps." + name + ".bench.example.com"
	created, rv := summaryEpoch.Add(-time.Duration(i)*time.Minute), fmt.Sprint(1000000+hub*10000+i)
	labels := map[string]string{"cloud": "Amazon", "vendor": "OpenShift", "name": name,
		"cluster.open-cluster-management.io/clusterset": "default", "openshiftVersion": version}
	claims := map[string]string{"id.openshift.io": id, "version.openshift.io": version,
		"platform.open-cluster-management.io": "AWS", "product.open-cluster-management.io": "OpenShift",
		"region.open-cluster-management.io": "us-east-1", "consoleurl.cluster.open-cluster-management.io": console,
		"kubeversion.open-cluster-management.io": kube, "name": name}
	capacity := map[string]string{"cpu": "24", "memory": "98765432Ki", "pods": "750", "core_worker": "24", "socket_worker": "3"}
	allocatable := map[string]string{"cpu": "23500m", "memory": "95432100Ki", "pods": "750", "core_worker": "24", "socket_worker": "3"}
	return private.ManagedClusterSummary{Name: name, Uid: &id, ResourceVersion: &rv, CreatedAt: &created,
		Labels: &labels, Claims: &claims, Capacity: &capacity, Allocatable: &allocatable,
		Conditions: clusterConditions(), KubernetesVersion: &kube}
}

// clusterConditions are the conditions of a joined, available cluster.
func clusterConditions() *[]private.ClusterCondition {
	cond := func(t, reason, message string, minute int) private.ClusterCondition {
		at := summaryEpoch.Add(time.Duration(minute) * time.Minute)
		return private.ClusterCondition{Type: t, Status: "True", Reason: &reason, Message: &message, LastTransitionTime: &at}
	}
	return &[]private.ClusterCondition{
		cond("HubAcceptedManagedCluster", "HubClusterAdminAccepted", "Accepted by hub cluster admin", 0),
		cond("ManagedClusterJoined", "ManagedClusterJoined", "Managed cluster joined", 1),
		cond("ManagedClusterConditionAvailable", "ManagedClusterAvailable", "Managed cluster is available", 2),
	}
}

// fullSyncBatch is batch b of a's full resync under generation: as
// fleetshard-sync does, a cluster whose hash the fleet manager acknowledged
// goes by name and hash, the others in full.
func fullSyncBatch(o options, a *agent, b int, generation int64) private.InventoryBatch {
	start, end := b*o.BatchSize, min((b+1)*o.BatchSize, o.ClustersPerHub)
	clusters := make([]private.ManagedClusterSummary, 0, end-start)
	for i := start; i < end; i++ {
		clusters = append(clusters, clusterSummary(a.index, i, 0))
	}
	return agentapi.ResyncBatch(generation, end == o.ClustersPerHub, clusters, a.acked)
}

// changeBatch is hub's incremental batch changing the version of
// changedPerHub clusters, spread over its inventory.
func changeBatch(o options, hub int, generation int64) private.InventoryBatch {
	k := o.changedPerHub()
	batch := private.InventoryBatch{Generation: generation, Upserts: make([]private.ManagedClusterSummary, 0, k), Deletes: []string{}}
	for j := range k {
		batch.Upserts = append(batch.Upserts, clusterSummary(hub, j*o.ClustersPerHub/k, 1))
	}
	return batch
}

// batchesPerHub is how many batches one full resync takes.
func (o options) batchesPerHub() int { return (o.ClustersPerHub + o.BatchSize - 1) / o.BatchSize }

// errRefused is an answer that retrying will not change.
var errRefused = errors.New("refused")

// postBatch sends one batch, retrying (up to 3 attempts, 1 s apart) what failed
// in transport or with a 5xx, as an agent would.
func (a *agent) postBatch(ctx context.Context, b private.InventoryBatch) (ack, time.Duration, int, error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ack{}, 0, attempt, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		start := time.Now()
		var resp *private.PostHubInventoryResponse
		resp, err = a.client.PostHubInventoryWithResponse(ctx, a.hubID, b, a.auth)
		elapsed := time.Since(start)
		switch {
		case err != nil:
		case resp.JSON200 != nil:
			r := resp.JSON200
			if a.acked == nil {
				a.acked = map[string]string{}
			}
			maps.Copy(a.acked, r.ContentHashes)
			return ack{Written: r.Written, Unchanged: r.Unchanged, Deleted: r.Deleted, Tombstoned: r.Tombstoned,
				Confirmed: r.Confirmed, Resent: len(r.Resend)}, elapsed, attempt, nil
		case resp.StatusCode() < http.StatusInternalServerError:
			return ack{}, elapsed, attempt, fmt.Errorf("PostHubInventory(%s) = %s: %s: %w", a.hubID, resp.Status(), resp.Body, errRefused)
		default:
			err = fmt.Errorf("PostHubInventory(%s) = %s: %s", a.hubID, resp.Status(), resp.Body)
		}
	}
	return ack{}, 0, 2, err
}

// runAgents runs send for every agent at once, one goroutine each, and
// gathers their acknowledgements and request latencies into ph.
func runAgents(ctx context.Context, agents []*agent, ph *phase, send func(context.Context, *agent, func(private.InventoryBatch) error) error) error {
	var mu sync.Mutex
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		post := func(b private.InventoryBatch) error {
			got, elapsed, retries, err := a.postBatch(ctx, b)
			mu.Lock()
			defer mu.Unlock()
			ph.Requests, ph.Retries, ph.Rows = ph.Requests+1, ph.Retries+retries, ph.Rows+len(b.Upserts)+presentCount(b)
			ph.Ack.add(got)
			if err == nil {
				ph.Latencies = append(ph.Latencies, elapsed)
			}
			return err
		}
		wg.Go(func() { errs[i] = send(ctx, a, post) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fullSync is a full-resync scenario under generation. Its batches are
// built by prepare, before the clock starts: a real agent builds them on its
// hub, not on the fleet manager's machine, so building them must not take the
// fleet manager's CPU inside the measured time.
func fullSync(o options, agents []*agent, generation int64) (prepare func(), work func(context.Context, *phase) error) {
	batches := make([][]private.InventoryBatch, len(agents))
	prepare = func() {
		for i, a := range agents {
			batches[i] = batches[i][:0]
			for b := range o.batchesPerHub() {
				batches[i] = append(batches[i], fullSyncBatch(o, a, b, generation))
			}
		}
	}
	work = func(ctx context.Context, ph *phase) error {
		return runAgents(ctx, agents, ph, func(ctx context.Context, a *agent, post func(private.InventoryBatch) error) error {
			for _, b := range batches[a.index] {
				if err := post(b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return prepare, work
}

// changes is the work of the changes scenario: one batch per agent.
func changes(o options, agents []*agent, generation int64) func(context.Context, *phase) error {
	return func(ctx context.Context, ph *phase) error {
		return runAgents(ctx, agents, ph, func(_ context.Context, a *agent, post func(private.InventoryBatch) error) error {
			return post(changeBatch(o, a.index, generation))
		})
	}
}

// presentCount is how many clusters b reports by name and hash.
func presentCount(b private.InventoryBatch) int {
	if b.Present == nil {
		return 0
	}
	return len(*b.Present)
}
