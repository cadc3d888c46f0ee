package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// importSamples is how many registrations get import material from their
// agent, for get by id and the import reads.
const importSamples = 1000

// regResults is what the registration benchmark measured.
type regResults struct {
	opts    options
	machine machine
	started time.Time
	took    time.Duration

	creates    []createResult
	bulk       bulkResult
	reads      readResults // its phases and totals, printed as the read benchmark's
	readRows   int         // live registrations while the reads ran
	deepPage   int
	beatFails  int64
	peakRSS    int64
	hwm        int64
	logLines   int
	logTop     []string
	notes      []string
	loadedRows int
}

// runRegistrations times the registration scenarios of issue 17 against a
// fresh database, the reconcilers running and every hub's agent long-polling
// its desired set and acknowledging each revision at once.
func runRegistrations(ctx context.Context, o options, out io.Writer) error {
	r := &regResults{opts: o, started: time.Now()}
	b, err := startBenchServer(ctx, o, out, "fleet-bench --registrations")
	if err != nil {
		return err
	}
	defer b.close()
	r.machine = b.machine
	db, s, m := b.db, b.server, b.minter
	if err := registrationScenarios(ctx, r, db, s, m, out); err != nil {
		return err
	}
	r.machine.loadAfter, r.took = loadAverage(), time.Since(r.started)
	s.stop()
	r.logLines, r.logTop = s.logSummary(5)
	reportRegistrations(out, r)
	return nil
}

// registrationScenarios starts the samplers, the fleet and its agents, and
// runs the scenarios in order: creates at initialRegistrations rows, the
// load to --loaded-registrations, creates at that size, the reads, then the
// bulk onboarding.
func registrationScenarios(ctx context.Context, r *regResults, db *benchDB, s *server, m *minter, out io.Writer) error {
	o := r.opts
	p, bg, stopBackground, err := startProber(ctx, db, s)
	if err != nil {
		return err
	}
	defer stopBackground()
	f, err := setupFleet(ctx, o, s, m)
	if err != nil {
		return err
	}
	if err := f.heartbeatAll(ctx); err != nil {
		return err
	}
	var beatFailures atomic.Int64
	var agents sync.WaitGroup
	defer agents.Wait()
	defer stopBackground()
	agents.Go(func() { f.keepBeating(bg, o.HeartbeatInterval, &beatFailures) })
	for _, a := range f.agents {
		agents.Go(func() { a.longPoll(bg, o.PollWait, nil, true, o.DesiredDeltas) })
	}
	watch, err := newDeliveryWatch(ctx, db, p.backend)
	if err != nil {
		return err
	}
	defer watch.close()
	c, err := newCreator(o, s, p, watch)
	if err != nil {
		return err
	}
	one, err := orgUsers(m, []string{benchOrg})
	if err != nil {
		return err
	}
	many, err := orgUsers(m, manyOrgs(o.CreateOrgs))
	if err != nil {
		return err
	}
	creates := func(size string) error {
		for _, sc := range []struct {
			name, prefix string
			users        []orgUser
		}{
			{"create, 1 org, " + size, "one-" + size, one},
			{fmt.Sprintf("create, %d orgs, %s", o.CreateOrgs, size), "many-" + size, many},
		} {
			fmt.Fprintf(out, "%s ...\n", sc.name)
			res, err := c.run(ctx, sc.name, sc.prefix, sc.users)
			r.creates = append(r.creates, res)
			if err != nil {
				return err
			}
			if err := s.alive(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := loadRegistrations(ctx, db, benchOrg, 0, initialRegistrations, out); err != nil {
		return err
	}
	if err := creates(fmt.Sprint(initialRegistrations)); err != nil {
		return err
	}
	if err := loadRegistrations(ctx, db, benchOrg, initialRegistrations, o.LoadedRegistrations, out); err != nil {
		return err
	}
	r.loadedRows = o.LoadedRegistrations
	if err := creates(rowsLabel(o.LoadedRegistrations)); err != nil {
		return err
	}
	if err := registrationReads(ctx, r, p, f, m, out); err != nil {
		return err
	}
	if err := runBulk(ctx, r, s, p, m, watch, out); err != nil {
		return err
	}
	r.beatFails, r.peakRSS = beatFailures.Load(), p.rss.peak.Load()
	if r.hwm, err = procStatusKB(s.pid(), "VmHWM"); err != nil {
		return err
	}
	return s.alive()
}

// rowsLabel names a table size for the scenarios: 300k, 3k, 100.
func rowsLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// runBulk runs the bulk onboarding when the server offers it, and notes it
// "not offered" otherwise.
func runBulk(ctx context.Context, r *regResults, s *server, p *prober, m *minter, watch *deliveryWatch, out io.Writer) error {
	o := r.opts
	if o.BulkRegistrations == 0 {
		r.notes = append(r.notes, "bulk onboarding: skipped (--bulk-registrations=0)")
		return nil
	}
	admin, err := adminReadClient(s, m, 1)
	if err != nil {
		return err
	}
	paths, err := admin.specPaths(ctx)
	if err != nil {
		return err
	}
	if !paths[batchPath] {
		r.notes = append(r.notes, "bulk onboarding: not offered (the server's OpenAPI document has no POST "+batchPath+")")
		fmt.Fprintln(out, "bulk onboarding: not offered by this server")
		return nil
	}
	orgs := make([]string, o.BulkClients)
	for i := range orgs {
		orgs[i] = fmt.Sprintf("bench-bulk-%02d", i+1)
	}
	users, err := orgUsers(m, orgs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bulk onboarding: %d registrations in batches of %d from %d clients ...\n", o.BulkRegistrations, o.BulkBatchSize, o.BulkClients)
	r.bulk, err = bulkOnboard(ctx, o, s, p, watch, users)
	if err != nil {
		return err
	}
	return s.alive()
}

// adminReadClient is a readClient as a fleet administrator, with n
// keep-alive connections.
func adminReadClient(s *server, m *minter, n int) (*readClient, error) {
	bearer, err := m.bearer(auth.TokenRequest{OrgID: "sre", Username: "bench-reader", Roles: []string{"fleet-admin"}})
	if err != nil {
		return nil, err
	}
	return &readClient{base: s.apiURL, bearer: bearer, http: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n}}}, nil
}

// registrationReads gives importSamples registrations of benchOrg their
// import material, through their agents, then times each read as benchOrg's
// user at --read-concurrency for --read-duration.
func registrationReads(ctx context.Context, r *regResults, p *prober, f *fleet, m *minter, out io.Writer) error {
	o := r.opts
	ids, hubs, err := sampleRegistrations(ctx, p.db, benchOrg, importSamples)
	if err != nil {
		return err
	}
	if err := reportImports(ctx, f, ids, hubs); err != nil {
		return err
	}
	if r.readRows, err = countRegistrations(ctx, p.db); err != nil {
		return err
	}
	admin, err := adminReadClient(p.server, m, o.ReadConcurrency)
	if err != nil {
		return err
	}
	org, err := orgClient(admin, m)
	if err != nil {
		return err
	}
	r.deepPage = deepPage(r.readRows)
	r.reads = readResults{totals: map[string]int{}}
	for _, sc := range registrationReadScenarios(ids, f, r.deepPage, o.LoadedRegistrations) {
		fmt.Fprintf(out, "%s ...\n", sc.name)
		ph, err := p.measure(ctx, sc.name, func(ctx context.Context, ph *phase) error {
			return org.drive(ctx, sc, o.ReadConcurrency, o.ReadDuration, ph, r.reads.totals)
		})
		r.reads.phases = append(r.reads.phases, ph)
		if err != nil {
			return err
		}
		if err := p.server.alive(); err != nil {
			return err
		}
	}
	return nil
}

// deepPage is the page of 100 in the middle of rows.
func deepPage(rows int) int { return max(1, rows/200) }

// registrationReadScenarios are the reads of GET /clusters and its
// children: a page of 100, page deep, the searches (a loaded name at random,
// a label 1 in 20 rows carry, the phase nearly all have, a hub at random),
// get by id and the import material of ids.
func registrationReadScenarios(ids []string, f *fleet, deep, loaded int) []readScenario {
	list := func(name string, search func(w *readWorker) string, page int) readScenario {
		return readScenario{name: name, next: func(w *readWorker) string {
			v := url.Values{"size": {"100"}}
			if page > 1 {
				v.Set("page", fmt.Sprint(page))
			}
			if search != nil {
				v.Set("search", search(w))
			}
			return "/clusters?" + v.Encode()
		}}
	}
	fixed := func(s string) func(*readWorker) string { return func(*readWorker) string { return s } }
	return []readScenario{
		list("list page of 100", nil, 1),
		list(fmt.Sprintf("list page %d of 100", deep), nil, deep),
		list("search name", func(w *readWorker) string {
			return fmt.Sprintf("name = '%s'", loadedName(w.rng.IntN(loaded)))
		}, 1),
		list("search labels.team", fixed("labels.team = 'team-7'"), 1),
		list("search phase", fixed("phase = 'ready'"), 1),
		list("search hub_id", func(w *readWorker) string {
			return fmt.Sprintf("hub_id = '%s'", f.agents[w.rng.IntN(len(f.agents))].hubID)
		}, 1),
		{name: "get by id", next: func(w *readWorker) string { return "/clusters/" + ids[w.rng.IntN(len(ids))] }},
		{name: "import material", next: func(w *readWorker) string { return "/clusters/" + ids[w.rng.IntN(len(ids))] + "/import" }},
	}
}

// reportImports has the agent of each sample's hub report it Joined and
// Available with its import material, as a hub makes it.
func reportImports(ctx context.Context, f *fleet, ids, hubs []string) error {
	byHub := map[string][]private.RegistrationStatus{}
	for i, id := range ids {
		byHub[hubs[i]] = append(byHub[hubs[i]], private.RegistrationStatus{RegistrationId: id,
			Conditions: []private.Condition{
				{Type: "Joined", Status: private.True, Reason: "ManagedClusterJoined"},
				{Type: "Available", Status: private.True, Reason: "ManagedClusterAvailable"}},
			Import: &private.ImportMaterial{Manifests: importManifests(id)}})
	}
	for _, a := range f.agents {
		items := byHub[a.hubID]
		if len(items) == 0 {
			continue
		}
		resp, err := a.client.PutRegistrationsStatusWithResponse(ctx, a.hubID, private.RegistrationStatusBatch{Items: items}, a.auth)
		if err != nil {
			return fmt.Errorf("PutRegistrationsStatus(%s): %w", a.hubID, err)
		}
		if resp.JSON200 == nil {
			return fmt.Errorf("PutRegistrationsStatus(%s) = %s: %s", a.hubID, resp.Status(), truncate(string(resp.Body), 300))
		}
	}
	return nil
}

// importManifests is import material shaped as a hub's <name>-import
// secret gives it: the klusterlet's CRD and its import YAML, as large as a
// real one.
func importManifests(id string) string {
	var b strings.Builder
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: klusterlets.operator.open-cluster-management.io\nspec:\n  group: operator.open-cluster-management.io\n")
	for i := range 60 {
		fmt.Fprintf(&b, "  # schema property %d of the klusterlet's spec, as the hub renders it\n", i)
	}
	fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-hub-kubeconfig\n  namespace: open-cluster-management-agent\n  labels:\n    registration: %s\ndata:\n  kubeconfig: %s\n", id, strings.Repeat("QUJD", 512))
	return b.String()
}
