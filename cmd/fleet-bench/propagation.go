package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// receipts records when, and by which hub's agent, each registration id was
// first received.
type receipts struct {
	mu       sync.Mutex
	seen     map[string]receipt
	failures int
}

type receipt struct {
	at  time.Time
	hub string
}

func (r *receipts) record(hub string, regs []private.DesiredRegistration, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range regs {
		if _, ok := r.seen[reg.RegistrationId]; !ok {
			r.seen[reg.RegistrationId] = receipt{at: at, hub: hub}
		}
	}
}

func (r *receipts) failed() {
	r.mu.Lock()
	r.failures++
	r.mu.Unlock()
}

// missing returns how many of ids have not been received yet.
func (r *receipts) missing(ids map[string]time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id := range ids {
		if _, ok := r.seen[id]; !ok {
			n++
		}
	}
	return n
}

// longPoll is the agent's desired-set loop: it asks for what is past the
// revision it has, and records the registrations of every set it receives.
// With ack it also acknowledges each revision at once with a heartbeat, as
// the real agent does once it applied a set; without rec it reads only the
// set's revision, leaving the registrations undecoded.
// With deltas, once it holds a set it asks for the changes since its
// revision, as fleetshard-sync does.
func (a *agent) longPoll(ctx context.Context, wait time.Duration, rec *receipts, ack, deltas bool) {
	waitParam := fmt.Sprintf("%dms", wait.Milliseconds())
	for ctx.Err() == nil {
		after := a.applied.Load()
		params := &private.GetHubDesiredParams{After: &after, Wait: &waitParam}
		if since := after; deltas && since > 0 {
			params.Since = &since
		}
		var (
			revision int64
			got      bool
			err      error
		)
		if rec != nil {
			revision, got, err = a.desiredSet(ctx, params, rec)
		} else {
			revision, got, err = a.desiredRevision(ctx, params)
		}
		switch {
		case ctx.Err() != nil:
		case err != nil:
			if rec != nil {
				rec.failed()
			}
			pause(ctx, 100*time.Millisecond)
		case got:
			a.applied.Store(revision)
			if ack && a.heartbeat(ctx) != nil && ctx.Err() == nil {
				pause(ctx, 100*time.Millisecond)
			}
		}
	}
}

// desiredSet fetches the desired set past params.After and records its
// registrations; got is false when the wait ended without a new revision.
func (a *agent) desiredSet(ctx context.Context, params *private.GetHubDesiredParams, rec *receipts) (int64, bool, error) {
	resp, err := a.client.GetHubDesiredWithResponse(ctx, a.hubID, params, a.auth)
	at := time.Now()
	switch {
	case err != nil:
		return 0, false, err
	case resp.JSON200 != nil:
		rec.record(a.hubID, resp.JSON200.Registrations, at)
		return resp.JSON200.Revision, true, nil
	case resp.StatusCode() == http.StatusNotModified:
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("GetHubDesired(%s) = %s", a.hubID, resp.Status())
}

// desiredRevision fetches the desired set past params.After and decodes only
// its revision: a set of thousands of registrations costs the driver, which
// shares the machine's CPUs with the server, little.
func (a *agent) desiredRevision(ctx context.Context, params *private.GetHubDesiredParams) (int64, bool, error) {
	resp, err := a.client.GetHubDesired(ctx, a.hubID, params, a.auth)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, false, nil
	case http.StatusOK:
		var set struct {
			Revision int64 `json:"revision"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
			return 0, false, fmt.Errorf("GetHubDesired(%s): %w", a.hubID, err)
		}
		return set.Revision, true, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return 0, false, fmt.Errorf("GetHubDesired(%s) = %s", a.hubID, resp.Status)
}

// propagation is the work of the propagation scenario: every agent
// long-polls while the user registers clusters one at a time; a sample is the
// time from a POST's answer to the receipt of the registration by its hub's
// agent. Samples not received within --propagation-timeout are missing.
func propagation(o options, f *fleet) func(context.Context, *phase) error {
	return func(ctx context.Context, ph *phase) error {
		rec := &receipts{seen: map[string]receipt{}}
		pollCtx, stopPolls := context.WithCancel(ctx)
		var polls sync.WaitGroup
		for _, a := range f.agents {
			polls.Go(func() { a.longPoll(pollCtx, o.PollWait, rec, false, o.DesiredDeltas) })
		}
		defer polls.Wait()
		defer stopPolls()
		pause(ctx, time.Second) // let every long-poll reach the server and park
		posted, err := register(ctx, o, f, ph)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(o.SampleTimeout)
		for rec.missing(posted) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			pause(ctx, 10*time.Millisecond)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for id, at := range posted {
			if got, ok := rec.seen[id]; ok {
				ph.Latencies, ph.Rows = append(ph.Latencies, max(0, got.at.Sub(at))), ph.Rows+1
			}
		}
		ph.Retries = rec.failures
		if o.SamplesFile == "" {
			return nil
		}
		return writeSamples(o.SamplesFile, posted, rec.seen)
	}
}

// writeSamples writes one CSV line per registration: its id, when its POST
// was answered, when and by which hub's agent it was received, and the
// latency in milliseconds (empty when it was not received).
func writeSamples(path string, posted map[string]time.Time, seen map[string]receipt) error {
	var b strings.Builder
	b.WriteString("registration_id,posted_at,received_at,hub_id,latency_ms\n")
	for id, at := range posted {
		got, ok := seen[id]
		if !ok {
			fmt.Fprintf(&b, "%s,%s,,,\n", id, at.UTC().Format(time.RFC3339Nano))
			continue
		}
		fmt.Fprintf(&b, "%s,%s,%s,%s,%.1f\n", id, at.UTC().Format(time.RFC3339Nano), got.at.UTC().Format(time.RFC3339Nano),
			got.hub, float64(got.at.Sub(at))/float64(time.Millisecond))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// register creates the samples through POST /clusters, --propagation-gap
// apart, and returns when each POST was answered, by registration id.
func register(ctx context.Context, o options, f *fleet, ph *phase) (map[string]time.Time, error) {
	posted := map[string]time.Time{}
	zone := benchZone
	for i := range o.Samples {
		name := fmt.Sprintf("bench-reg-%04d", i)
		start := time.Now()
		resp, err := f.user.CreateClusterWithResponse(ctx, nil, public.ClusterCreate{Name: name, Product: public.OCP, Zone: &zone}, f.userFn)
		answered := time.Now()
		if err != nil {
			return posted, fmt.Errorf("CreateCluster(%s): %w", name, err)
		}
		if resp.JSON202 == nil {
			return posted, fmt.Errorf("CreateCluster(%s) = %s: %s", name, resp.Status(), resp.Body)
		}
		posted[resp.JSON202.Id] = answered
		ph.Requests++
		ph.Posts = append(ph.Posts, answered.Sub(start))
		select {
		case <-ctx.Done():
			return posted, ctx.Err()
		case <-time.After(o.SampleGap):
		}
	}
	return posted, nil
}

// pause waits d, or less when ctx ends: the driver paces its requests.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
