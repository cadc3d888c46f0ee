package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// batchPath is the bulk onboarding operation (createClusters), below the
// API's base path.
const batchPath = "/clusters:batch"

// bulkResult is what the bulk onboarding measured. Its phase spans the
// batches and the wait for Delivered; its Latencies are the batches'.
type bulkResult struct {
	phase
	offered    bool // the server's OpenAPI document has the operation
	rowsBefore int
	clients    int
	batches    int            // requests answered 200
	created    int            // items answered 202
	failures   map[string]int // the other items and requests, by status and code
	answered   time.Duration  // from the first batch to the last answer
	postCPU    counters
	delivery   deliveryOutcome
}

// batchItems is the items of batch b of --bulk-batch-size, named
// bulk-<n> (unique within each client's organisation).
func batchItems(o options, b int) []public.ClusterCreate {
	zone := benchZone
	start, end := b*o.BulkBatchSize, min((b+1)*o.BulkBatchSize, o.BulkRegistrations)
	items := make([]public.ClusterCreate, 0, max(0, end-start))
	for i := start; i < end; i++ {
		labels := public.Labels{"env": "bulk", "team": fmt.Sprintf("team-%d", i%20)}
		region := benchRegions[i%len(benchRegions)]
		items = append(items, public.ClusterCreate{Name: fmt.Sprintf("bulk-%07d", i), Product: public.OCP, Zone: &zone,
			Region: &region, Labels: &labels})
	}
	return items
}

// batchCount is how many batches the bulk onboarding sends.
func (o options) batchCount() int {
	return (o.BulkRegistrations + o.BulkBatchSize - 1) / o.BulkBatchSize
}

// tally adds one answered batch's items to the counts: 202 is created,
// anything else a failure of its status and code.
func tally(items []public.ClusterBatchItemResult, failures map[string]int) (created int) {
	for _, it := range items {
		if it.Status == http.StatusAccepted && it.Cluster != nil {
			created++
			continue
		}
		key := fmt.Sprint(it.Status)
		if it.Error != nil && it.Error.Code != "" {
			key += " " + it.Error.Code
		}
		failures[key]++
	}
	return created
}

// bulkOnboard sends --bulk-registrations registrations in batches of
// --bulk-batch-size through the generated client's CreateClusters from
// --bulk-clients clients, each as its own organisation's user, taking the
// batches in turn, each with its own Idempotency-Key; then it waits until
// every one created is Delivered.
func bulkOnboard(ctx context.Context, o options, s *server, p *prober, watch *deliveryWatch, users []orgUser) (bulkResult, error) {
	r := bulkResult{offered: true, clients: len(users), failures: map[string]int{}}
	var err error
	if r.rowsBefore, err = countRegistrations(ctx, p.db); err != nil {
		return r, err
	}
	client, err := public.NewClientWithResponses(s.apiURL, public.WithHTTPClient(&http.Client{Timeout: 5 * time.Minute,
		Transport: &http.Transport{MaxIdleConns: len(users), MaxIdleConnsPerHost: len(users)}}))
	if err != nil {
		return r, err
	}
	r.phase, err = p.measure(ctx, "bulk onboarding", func(ctx context.Context, ph *phase) error {
		p.backend.sample(ctx)
		before, err := p.read(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		var (
			next atomic.Int64
			mu   sync.Mutex
			wg   sync.WaitGroup
		)
		for _, user := range users {
			wg.Go(func() {
				for ctx.Err() == nil {
					b := int(next.Add(1) - 1)
					if b >= o.batchCount() {
						return
					}
					t0 := time.Now()
					key := fmt.Sprintf("bench-bulk-%06d", b)
					resp, err := client.CreateClustersWithResponse(ctx, &public.CreateClustersParams{IdempotencyKey: &key},
						public.ClusterBatchCreate{Items: batchItems(o, b)}, user.fn)
					took := time.Since(t0)
					mu.Lock()
					switch {
					case err != nil:
						r.failures[failureKey(0, nil)]++
					case resp.JSON200 == nil:
						r.failures["batch "+failureKey(resp.StatusCode(), resp.Body)]++
					default:
						r.batches++
						r.created += tally(resp.JSON200.Items, r.failures)
						ph.Latencies = append(ph.Latencies, took)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		r.answered = time.Since(start)
		p.backend.sample(ctx)
		after, err := p.read(ctx)
		if err != nil {
			return err
		}
		r.postCPU = after.minus(before)
		ph.Requests, ph.Rows = o.batchCount(), r.created
		orgs := make([]string, len(users))
		for i, u := range users {
			orgs[i] = u.org
		}
		r.delivery.want = r.created
		r.delivery.delivered, err = watch.waitOrgs(ctx, orgs, r.created, o.DeliveryTimeout)
		r.delivery.after = time.Since(start)
		return err
	})
	return r, err
}
