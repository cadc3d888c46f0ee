package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// batchItemResult is one item of a ClusterBatchResult, as much as the
// benchmark reads of it.
type batchItemResult struct {
	Index   int `json:"index"`
	Status  int `json:"status"`
	Cluster *struct {
		ID string `json:"id"`
	} `json:"cluster"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
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
func tally(items []batchItemResult, failures map[string]int) (created int) {
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
// --bulk-batch-size from --bulk-clients clients, each as its own
// organisation's user, taking the batches in turn, each with its own
// Idempotency-Key; then it waits until every one created is Delivered.
func bulkOnboard(ctx context.Context, o options, s *server, p *prober, watch *deliveryWatch, users []orgUser) (bulkResult, error) {
	r := bulkResult{offered: true, clients: len(users), failures: map[string]int{}}
	var err error
	if r.rowsBefore, err = countRegistrations(ctx, p.db); err != nil {
		return r, err
	}
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConns: len(users), MaxIdleConnsPerHost: len(users)}}
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
					items, status, body, err := postBatch(ctx, client, s.apiURL, user, fmt.Sprintf("bench-bulk-%06d", b), batchItems(o, b))
					took := time.Since(t0)
					mu.Lock()
					switch {
					case err != nil:
						r.failures[failureKey(0, nil)]++
					case status != http.StatusOK:
						r.failures["batch "+failureKey(status, body)]++
					default:
						r.batches++
						r.created += tally(items, r.failures)
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

// postBatch sends one POST /clusters:batch as user and decodes its items.
func postBatch(ctx context.Context, c *http.Client, base string, user orgUser, key string, items []public.ClusterCreate) ([]batchItemResult, int, []byte, error) {
	body, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		return nil, 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+batchPath, bytes.NewReader(body))
	if err != nil {
		return nil, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if err := user.fn(ctx, req); err != nil {
		return nil, 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, resp.StatusCode, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, buf.Bytes(), nil
	}
	var result struct {
		Items []batchItemResult `json:"items"`
	}
	if err := json.Unmarshal(buf.Bytes(), &result); err != nil {
		return nil, resp.StatusCode, buf.Bytes(), fmt.Errorf("POST %s: %w", batchPath, err)
	}
	return result.Items, resp.StatusCode, nil, nil
}
