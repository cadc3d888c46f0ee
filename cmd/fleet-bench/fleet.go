package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// benchZone is the zone of every hub and registration of the run.
const benchZone = "bench"

// agent is one simulated hub agent: its hub, its token and its own
// keep-alive HTTP client.
type agent struct {
	index   int
	hubID   string
	client  *private.ClientWithResponses
	auth    private.RequestEditorFn
	applied atomic.Int64 // the revision of the last desired set received
	// acked is, as in fleetshard-sync, the content hash the fleet manager
	// acknowledged per cluster: a resync reports unchanged ones by hash.
	acked map[string]string
}

// fleet is the run's hubs, their agents and the user who registers clusters.
type fleet struct {
	agents []*agent
	user   *public.ClientWithResponses
	userFn public.RequestEditorFn
}

// minter mints the run's tokens with the development key serve trusts.
type minter struct {
	key *auth.DevKey
	cfg auth.Config
}

func newMinter(keyDir string) (*minter, error) {
	key, err := auth.EnsureDevKey(keyDir)
	if err != nil {
		return nil, err
	}
	return &minter{key: key, cfg: auth.DefaultConfig()}, nil
}

func (m *minter) bearer(req auth.TokenRequest) (func(context.Context, *http.Request) error, error) {
	req.TTL = 24 * time.Hour
	token, err := m.key.Mint(m.cfg, req, time.Now())
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}, nil
}

// keepAliveClient is one agent's HTTP client: its own connection pool.
func keepAliveClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 4, MaxIdleConnsPerHost: 4, IdleConnTimeout: 2 * time.Minute}}
}

// setupFleet creates the hubs through the admin API, one agent per hub.
func setupFleet(ctx context.Context, o options, s *server, m *minter) (*fleet, error) {
	adminFn, err := m.bearer(auth.TokenRequest{OrgID: "sre", Username: "bench-admin", Roles: []string{"fleet-admin"}})
	if err != nil {
		return nil, err
	}
	adminClient, err := admin.NewClientWithResponses(s.apiURL, admin.WithHTTPClient(keepAliveClient()))
	if err != nil {
		return nil, err
	}
	f := &fleet{}
	for i := range o.Hubs {
		a, err := createAgent(ctx, o, s, m, adminClient, admin.RequestEditorFn(adminFn), i)
		if err != nil {
			return nil, err
		}
		f.agents = append(f.agents, a)
	}
	userFn, err := m.bearer(auth.TokenRequest{OrgID: "bench-org", Username: "bench-user"})
	if err != nil {
		return nil, err
	}
	f.userFn = public.RequestEditorFn(userFn)
	f.user, err = public.NewClientWithResponses(s.apiURL, public.WithHTTPClient(keepAliveClient()))
	return f, err
}

func createAgent(ctx context.Context, o options, s *server, m *minter, c *admin.ClientWithResponses, fn admin.RequestEditorFn, i int) (*agent, error) {
	name := fmt.Sprintf("bench-%03d", i)
	identity := name + "-agent"
	resp, err := c.CreateHubWithResponse(ctx, admin.HubCreate{Name: name, Zone: benchZone, Region: benchZone + "-1",
		DeliveryMode: admin.Agent, Capacity: o.HubCapacity, AgentIdentity: &identity}, fn)
	if err != nil {
		return nil, fmt.Errorf("CreateHub(%s): %w", name, err)
	}
	if resp.JSON201 == nil {
		return nil, fmt.Errorf("CreateHub(%s) = %s: %s", name, resp.Status(), resp.Body)
	}
	agentFn, err := m.bearer(auth.TokenRequest{AgentID: identity})
	if err != nil {
		return nil, err
	}
	client, err := private.NewClientWithResponses(s.apiURL, private.WithHTTPClient(keepAliveClient()))
	if err != nil {
		return nil, err
	}
	return &agent{index: i, hubID: resp.JSON201.Id, client: client, auth: private.RequestEditorFn(agentFn)}, nil
}

// heartbeat reports the agent's status, acknowledging the last revision it received.
func (a *agent) heartbeat(ctx context.Context) error {
	resp, err := a.client.PutHubStatusWithResponse(ctx, a.hubID, private.HubStatusReport{
		AgentVersion: "fleet-bench", AgentStartGeneration: 1, AppliedRevision: a.applied.Load()}, a.auth)
	if err != nil {
		return fmt.Errorf("PutHubStatus(%s): %w", a.hubID, err)
	}
	if resp.JSON200 == nil {
		return fmt.Errorf("PutHubStatus(%s) = %s: %s", a.hubID, resp.Status(), resp.Body)
	}
	return nil
}

// heartbeatAll sends every agent's heartbeat once, in parallel.
func (f *fleet) heartbeatAll(ctx context.Context) error {
	errs := make([]error, len(f.agents))
	var wg sync.WaitGroup
	for i, a := range f.agents {
		wg.Go(func() { errs[i] = a.heartbeat(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// keepBeating sends every agent's heartbeat each interval until ctx ends, as
// real agents do; failures are counted, not fatal.
func (f *fleet) keepBeating(ctx context.Context, interval time.Duration, failures *atomic.Int64) {
	var wg sync.WaitGroup
	for _, a := range f.agents {
		wg.Go(func() {
			// Real agents started at different times: spread the beats.
			select {
			case <-ctx.Done():
				return
			case <-time.After(rand.N(interval)):
			}
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := a.heartbeat(ctx); err != nil && ctx.Err() == nil {
						failures.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
}
