package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	domain "github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// Sizes of the pools benchmark's sample pools, each of 2 clusters whose
// workers scale from 2 to samplePoolWorkers nodes: sampleBooking is the
// default node threshold's share of what 2 workers hold, so one booking of
// it makes the scaler add a worker.
const (
	samplePoolUnits   = 100
	sampleBooking     = 16
	samplePoolWorkers = 10
)

// poolResults is what the pools benchmark measured.
type poolResults struct {
	clusters      int
	upTook        time.Duration
	createRate    float64
	createP99     time.Duration
	reserveRate   float64
	reserveP50    time.Duration
	reserveP99    time.Duration
	reserveErrors int
	scaleSamples  []time.Duration
}

// runPools times the capacity-pool scenarios of issue 18 against a fresh
// database, the reconcilers running and every hub's agent acknowledging each
// revision at once: --pool-count pools of --pool-clusters clusters (and
// --pool-samples sample pools) come up and are reported joined; then
// POST /clusters and POST /capacity_pools/{id}/reservations each at
// --create-concurrency; then, one at a time, bookings that cross a sample
// cluster's node threshold, each timed until its hub's desired set carries
// the cluster's scaled MachinePool.
func runPools(ctx context.Context, o options, out io.Writer) error {
	// One organisation makes every pool: the organisations' pool limits,
	// which the bench does not measure, are lifted (a --serve-arg after
	// these still sets them).
	o.ServeArgs = append([]string{"--pool-quota=0", "--pool-cluster-quota=0", "--reserved-units-quota=0"}, o.ServeArgs...)
	b, err := startBenchServer(ctx, o, out, "fleet-bench --pools")
	if err != nil {
		return err
	}
	defer b.close()
	f, err := setupFleet(ctx, o, b.server, b.minter)
	if err != nil {
		return err
	}
	if err := f.heartbeatAll(ctx); err != nil {
		return err
	}
	bg, stop := context.WithCancel(ctx)
	var agents sync.WaitGroup
	defer agents.Wait()
	defer stop()
	var beatFailures atomic.Int64
	agents.Go(func() { f.keepBeating(bg, o.HeartbeatInterval, &beatFailures) })
	for _, a := range f.agents {
		agents.Go(func() { a.longPoll(bg, o.PollWait, nil, true, true) })
	}
	r := &poolResults{}
	pools, samples, err := bringUpPools(ctx, o, b.db, f, r, out)
	if err != nil {
		return err
	}
	if err := timeCreatesAndBookings(ctx, o, f, pools, r, out); err != nil {
		return err
	}
	if err := timeScaling(ctx, o, b.db, f, samples, r, out); err != nil {
		return err
	}
	stop()
	reportPools(out, o, r)
	return b.server.alive()
}

// bringUpPools creates the blueprint and the pools through the API, waits
// until pool_mgr made every cluster and provisioning_mgr published it, and
// reports each joined and available from its hub's agent.
func bringUpPools(ctx context.Context, o options, db *benchDB, f *fleet, r *poolResults, out io.Writer) (pools, samples []string, err error) {
	start := time.Now()
	spec := public.BlueprintSpec{Release: "4.16.3", ControlPlaneSize: public.SizeMedium, MachinePools: []public.MachinePool{
		{Name: "infra", Size: public.SizeSmall, Replicas: ptrTo(2)},
		{Name: "workers", Size: public.SizeLarge, Autoscaling: &struct {
			MaxReplicas int `json:"max_replicas"`
			MinReplicas int `json:"min_replicas"`
		}{MaxReplicas: samplePoolWorkers, MinReplicas: 2}},
	}}
	bp, err := f.user.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "bench", Spec: spec}, f.userFn)
	if err != nil || bp.JSON201 == nil {
		return nil, nil, fmt.Errorf("CreateBlueprint = %s", answer(bp, err))
	}
	create := func(name string, clusters, units int) (string, error) {
		resp, err := f.user.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: name, BlueprintId: bp.JSON201.Id,
			BlueprintVersion: 1, Cloud: public.CloudAWS, Region: benchZone + "-1", Zone: ptrTo(benchZone), MinClusters: clusters,
			MaxClusters: clusters, UnitsPerCluster: units, Credentials: public.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "bench"},
				PullSecret: `{"auths":{}}`}}, f.userFn)
		if err != nil || resp.JSON201 == nil {
			return "", fmt.Errorf("CreateCapacityPool(%s) = %s", name, answer(resp, err))
		}
		return resp.JSON201.Id, nil
	}
	for i := range o.PoolCount {
		id, err := create(fmt.Sprintf("pool-%03d", i), o.PoolClusters, 1_000_000)
		if err != nil {
			return nil, nil, err
		}
		pools = append(pools, id)
	}
	for i := range o.PoolSamples {
		id, err := create(fmt.Sprintf("sample-%03d", i), 2, samplePoolUnits)
		if err != nil {
			return nil, nil, err
		}
		samples = append(samples, id)
	}
	r.clusters = o.PoolCount*o.PoolClusters + 2*o.PoolSamples
	fmt.Fprintf(out, "pools: %d pools of %d clusters and %d sample pools created; waiting for %d clusters to be published ...\n",
		o.PoolCount, o.PoolClusters, o.PoolSamples, r.clusters)
	placed := `SELECT count(*) FROM pool_clusters pc JOIN registrations r ON r.id = pc.registration_id
WHERE r.published_revision IS NOT NULL AND r.deleted_at IS NULL`
	if err := waitCount(ctx, db, placed, r.clusters, o.DeliveryTimeout); err != nil {
		return nil, nil, err
	}
	// Every hub's agent reports its pool clusters joined and available.
	now := time.Now()
	for _, a := range f.agents {
		rows, err := db.conn.Query(ctx, `SELECT r.id FROM registrations r JOIN pool_clusters pc ON pc.registration_id = r.id WHERE r.hub_id = $1`, a.hubID)
		if err != nil {
			return nil, nil, err
		}
		var items []private.RegistrationStatus
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, nil, err
			}
			items = append(items, private.RegistrationStatus{RegistrationId: id, Conditions: []private.Condition{
				{Type: domain.ConditionJoined, Status: private.True, Reason: "Joined", LastTransitionTime: now},
				{Type: domain.ConditionAvailable, Status: private.True, Reason: "Available", LastTransitionTime: now}}})
		}
		rows.Close()
		for len(items) > 0 {
			n := min(len(items), 1000)
			resp, err := a.client.PutRegistrationsStatusWithResponse(ctx, a.hubID, private.RegistrationStatusBatch{Items: items[:n]}, a.auth)
			if err != nil || resp.JSON200 == nil {
				return nil, nil, fmt.Errorf("PutRegistrationsStatus(%s) = %s", a.hubID, answer(resp, err))
			}
			items = items[n:]
		}
	}
	joined := `SELECT count(*) FROM pool_clusters pc JOIN registrations r ON r.id = pc.registration_id
WHERE r.hub_conditions @> '[{"type": "Joined", "status": "True"}]'`
	if err := waitCount(ctx, db, joined, r.clusters, o.DeliveryTimeout); err != nil {
		return nil, nil, err
	}
	r.upTook = time.Since(start)
	fmt.Fprintf(out, "pools: %d clusters published and joined in %s\n", r.clusters, r.upTook.Round(time.Millisecond))
	return pools, samples, nil
}

// waitCount polls query until it counts want, for at most timeout.
func waitCount(ctx context.Context, db *benchDB, query string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := db.conn.QueryRow(ctx, query).Scan(&n); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, %d of %d (%s)", timeout, n, want, query)
		}
		pause(ctx, 250*time.Millisecond)
	}
}

// timeCreatesAndBookings runs POST /clusters, then POST reservations into
// random pools, each at --create-concurrency for --create-duration.
func timeCreatesAndBookings(ctx context.Context, o options, f *fleet, pools []string, r *poolResults, out io.Writer) error {
	var seq sync.Mutex
	next := 0
	rate, lat, errs := timedClients(ctx, o.CreateConcurrency, o.CreateDuration, func(ctx context.Context) error {
		seq.Lock()
		next++
		name := fmt.Sprintf("pools-bench-%06d", next)
		seq.Unlock()
		resp, err := f.user.CreateClusterWithResponse(ctx, nil, public.ClusterCreate{Name: name, Zone: ptrTo(benchZone), Product: public.OCP}, f.userFn)
		if err != nil || resp.StatusCode() != http.StatusAccepted {
			return fmt.Errorf("CreateCluster = %s", answer(resp, err))
		}
		return nil
	})
	if errs > 0 {
		return fmt.Errorf("%d creates failed", errs)
	}
	r.createRate, r.createP99 = rate, percentile(lat, 0.99)
	fmt.Fprintf(out, "pools: POST /clusters %.0f/s, p99 %s\n", rate, r.createP99.Round(time.Microsecond))
	rate, lat, errs = timedClients(ctx, o.CreateConcurrency, o.CreateDuration, func(ctx context.Context) error {
		pool := pools[rand.N(len(pools))]
		resp, err := f.user.CreateReservationWithResponse(ctx, pool, public.ReservationCreate{Units: 1}, f.userFn)
		if err != nil || resp.JSON201 == nil {
			return fmt.Errorf("CreateReservation = %s", answer(resp, err))
		}
		return nil
	})
	r.reserveRate, r.reserveP50, r.reserveP99, r.reserveErrors = rate, percentile(lat, 0.5), percentile(lat, 0.99), errs
	fmt.Fprintf(out, "pools: POST reservations %.0f/s, p50 %s, p99 %s, %d failed\n", rate, r.reserveP50.Round(time.Microsecond),
		r.reserveP99.Round(time.Microsecond), errs)
	return nil
}

// timedClients runs call from n clients for d and returns the rate of the
// calls that succeeded, their latencies and how many failed.
func timedClients(ctx context.Context, n int, d time.Duration, call func(context.Context) error) (float64, []time.Duration, int) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed int
		wg     sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				err := call(ctx)
				took := time.Since(t0)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					lat = append(lat, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return float64(len(lat)) / time.Since(start).Seconds(), lat, failed
}

// timeScaling books, one sample pool at a time, units that cross a
// cluster's node threshold, and times from the booking's answer to the
// moment a long-poll of the cluster's hub's desired set holds the cluster's
// workers MachinePool at 3 replicas.
func timeScaling(ctx context.Context, o options, db *benchDB, f *fleet, samples []string, r *poolResults, out io.Writer) error {
	agents := map[string]*agent{}
	for _, a := range f.agents {
		agents[a.hubID] = a
	}
	for _, pool := range samples {
		resp, err := f.user.CreateReservationWithResponse(ctx, pool, public.ReservationCreate{Units: sampleBooking}, f.userFn)
		booked := time.Now()
		if err != nil || resp.JSON201 == nil {
			return fmt.Errorf("CreateReservation(%s) = %s", pool, answer(resp, err))
		}
		cluster := resp.JSON201.ClusterId
		var hub, name string
		if err := db.conn.QueryRow(ctx, `SELECT r.hub_id, pc.cluster_name FROM registrations r JOIN pool_clusters pc ON pc.registration_id = r.id
WHERE r.id = $1`, cluster).Scan(&hub, &name); err != nil {
			return err
		}
		took, err := awaitReplicas(ctx, agents[hub], cluster, name+"-workers", 3, booked, 30*time.Second)
		if err != nil {
			return err
		}
		r.scaleSamples = append(r.scaleSamples, took)
	}
	fmt.Fprintf(out, "pools: %d bookings crossing a node threshold timed\n", len(r.scaleSamples))
	return nil
}

// awaitReplicas long-polls a's hub's desired set from the revision it held
// at booked until registration id's MachinePool name has replicas, and
// returns how long after booked that set arrived.
func awaitReplicas(ctx context.Context, a *agent, id, name string, replicas int, booked time.Time, timeout time.Duration) (time.Duration, error) {
	wait := "5s"
	var after int64
	for time.Since(booked) < timeout {
		params := &private.GetHubDesiredParams{Wait: &wait}
		if after > 0 {
			params.After = &after
		}
		resp, err := a.client.GetHubDesiredWithResponse(ctx, a.hubID, params, a.auth)
		at := time.Now()
		if err != nil {
			return 0, err
		}
		if resp.JSON200 == nil {
			continue // no change within the wait
		}
		after = resp.JSON200.Revision
		for _, reg := range resp.JSON200.Registrations {
			if reg.RegistrationId != id {
				continue
			}
			for _, raw := range reg.Objects {
				var o struct {
					Kind     string
					Metadata struct{ Name string }
					Spec     struct{ Replicas int }
				}
				if json.Unmarshal(raw, &o) == nil && o.Kind == "MachinePool" && o.Metadata.Name == name && o.Spec.Replicas == replicas {
					return at.Sub(booked), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("MachinePool %s of %s not at %d replicas in its hub's desired set within %s", name, id, replicas, timeout)
}

func reportPools(out io.Writer, o options, r *poolResults) {
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	p99 := percentile(r.scaleSamples, 0.99)
	fmt.Fprintf(out, "\n== capacity pools (%d pools x %d clusters, %d sample pools, %d hubs)\n", o.PoolCount, o.PoolClusters, o.PoolSamples, o.Hubs)
	fmt.Fprintf(out, "clusters up (published and joined):   %d in %s\n", r.clusters, r.upTook.Round(time.Millisecond))
	fmt.Fprintf(out, "POST /clusters, %d clients:            %.0f/s (p99 %s)\n", o.CreateConcurrency, r.createRate, r.createP99.Round(time.Microsecond))
	fmt.Fprintf(out, "POST reservations, %d clients:         %.0f/s (p50 %s, p99 %s, %d failed)\n", o.CreateConcurrency, r.reserveRate,
		r.reserveP50.Round(time.Microsecond), r.reserveP99.Round(time.Microsecond), r.reserveErrors)
	fmt.Fprintf(out, "booking past a threshold -> scaled MachinePool in the hub's desired set: p50 %s, p99 %s, max %s (%d samples)  %s (target p99 < 1s)\n",
		percentile(r.scaleSamples, 0.5).Round(time.Millisecond), p99.Round(time.Millisecond), percentile(r.scaleSamples, 1).Round(time.Millisecond),
		len(r.scaleSamples), verdict(len(r.scaleSamples) > 0 && p99 < time.Second))
}

func ptrTo[T any](v T) *T { return &v }

// answer renders a generated client's answer for an error message: the
// transport error, or the status and body.
func answer(resp interface {
	StatusCode() int
}, err error) string {
	if err != nil {
		return err.Error()
	}
	if b, ok := resp.(interface{ Bytes() []byte }); ok {
		return fmt.Sprintf("%d %s", resp.StatusCode(), b.Bytes())
	}
	return fmt.Sprint(resp.StatusCode())
}
