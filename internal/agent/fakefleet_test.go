package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

const (
	fakeBasePath = "/api/fleet_manager/v1"
	fakeHubID    = "hub-1"
	fakeToken    = "agent-token"
)

// fakeFleet is an in-process fleet manager serving the private API's shapes
// for one hub. Every request the agent sends is validated against the
// private OpenAPI specification; one that does not match fails the test.
type fakeFleet struct {
	t      testing.TB
	hubID  string
	srv    *httptest.Server
	router routers.Router

	mu       sync.Mutex
	revision int64
	regs     []private.DesiredRegistration
	// history holds the set of every revision, from which the fake answers
	// an agent that names the revision it holds (since) with a delta, as
	// the fleet manager does; sinces records the since of every request.
	history map[int64][]private.DesiredRegistration
	sinces  []int64
	// wholeSets answers every request with the whole set, as a fleet
	// manager older than deltas does.
	wholeSets bool
	// revisionHistory is the history the revisions count in, sent with
	// every set and acknowledgement ("" sends none); restore changes it.
	revisionHistory string
	moved           chan struct{} // closed when the revision moves
	// waited, when set, is closed by the next long-poll that starts
	// waiting (see nextWait).
	waited   chan struct{}
	applied  int64
	tokens   []string
	statuses []private.HubStatusReport
	batches  []private.InventoryBatch
	// resources are the batches of the other kinds.
	resources []private.ResourceBatch
	// stored is the content hash kept per cluster, and per kind and key of
	// the other kinds; forget makes a name's (or key's) presence fail, as if
	// the fleet manager had lost the row.
	stored   map[string]string
	forget   map[string]bool
	regItems []private.RegistrationStatus
	// resyncOnce answers the next heartbeat with resync_requested.
	resyncOnce bool
	// failures answers the next n requests of an operation with 500.
	failures map[string]int
	// maxBody answers larger bodies with 413 (0: no limit).
	maxBody int
	// refuseFailures answers a heartbeat with failures with 400, as a
	// fleet manager older than that field does.
	refuseFailures bool
}

func newFakeFleet(t testing.TB) *fakeFleet {
	t.Helper()
	return newFakeFleetFor(t, fakeHubID)
}

// newFakeFleetFor is newFakeFleet for the hub hubID.
func newFakeFleetFor(t testing.TB, hubID string) *fakeFleet {
	t.Helper()
	f := &fakeFleet{t: t, hubID: hubID, moved: make(chan struct{}), failures: map[string]int{},
		history: map[int64][]private.DesiredRegistration{0: nil}}
	mux := http.NewServeMux()
	prefix := fakeBasePath + "/agent-hubs/{hub_id}"
	mux.HandleFunc("GET "+prefix+"/desired", f.handle("getHubDesired", f.desired))
	mux.HandleFunc("PUT "+prefix+"/status", f.handle("putHubStatus", f.status))
	mux.HandleFunc("POST "+prefix+"/inventory", f.handle("postHubInventory", f.inventory))
	mux.HandleFunc("PUT "+prefix+"/registrations/status", f.handle("putRegistrationsStatus", f.registrations))
	mux.HandleFunc("POST "+prefix+"/resources", f.handle("postHubResources", f.resourceBatch))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)

	data, err := openapi.Specs.ReadFile(openapi.Private)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", openapi.Private, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("LoadFromData(%s): %v", openapi.Private, err)
	}
	doc.Servers = openapi3.Servers{{URL: f.srv.URL + fakeBasePath}}
	if f.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatalf("gorillamux.NewRouter: %v", err)
	}
	return f
}

// URL is the base URL the agent is configured with.
func (f *fakeFleet) URL() string { return f.srv.URL + fakeBasePath }

// handle validates the request against the spec, checks the token and the
// hub, and injects the configured failures before calling h.
func (f *fakeFleet) handle(op string, h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			f.writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		f.mu.Lock()
		f.tokens = append(f.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		fail := f.failures[op] > 0
		if fail {
			f.failures[op]--
		}
		tooLarge := f.maxBody > 0 && len(body) > f.maxBody
		f.mu.Unlock()
		switch {
		case r.Header.Get("Authorization") != "Bearer "+fakeToken:
			f.writeError(w, http.StatusUnauthorized, "bad token")
			return
		case r.PathValue("hub_id") != f.hubID:
			f.writeError(w, http.StatusNotFound, "no such hub")
			return
		case tooLarge:
			f.writeError(w, http.StatusRequestEntityTooLarge, "too large")
			return
		case fail:
			f.writeError(w, http.StatusInternalServerError, "injected failure")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		route, params, err := f.router.FindRoute(r)
		if err != nil {
			f.t.Errorf("%s %s: no route in the private spec: %v", r.Method, r.URL.Path, err)
			f.writeError(w, http.StatusNotFound, err.Error())
			return
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			f.t.Errorf("%s %s: request does not match the private spec: %v\nbody: %s", r.Method, r.URL.Path, err, body)
			f.writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r, body)
	}
}

func (f *fakeFleet) writeError(w http.ResponseWriter, status int, reason string) {
	writeJSONFake(w, status, private.Error{Kind: private.ErrorKindError, Id: strconv.Itoa(status), Href: fakeBasePath + "/errors/" + strconv.Itoa(status),
		Code: "FAKE-" + strconv.Itoa(status), Reason: reason})
}

func writeJSONFake(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeFleet) desired(w http.ResponseWriter, r *http.Request, _ []byte) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	f.mu.Lock()
	f.sinces = append(f.sinces, since)
	f.mu.Unlock()
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil {
		f.t.Errorf("GET desired: wait %q: %v", r.URL.Query().Get("wait"), err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f.mu.Lock()
		rev, moved := f.revision, f.moved
		set := private.DesiredSet{Kind: private.DesiredSetKindDesiredSet, HubId: f.hubID, Revision: rev,
			RevisionHistory: fakeOptional(f.revisionHistory), Registrations: append([]private.DesiredRegistration{}, f.regs...)}
		if base, ok := f.history[since]; ok && since > 0 && !f.wholeSets {
			set = desiredDelta(set, since, base)
		}
		if rev == after && f.waited != nil {
			close(f.waited)
			f.waited = nil
		}
		f.mu.Unlock()
		if rev != after {
			writeJSONFake(w, http.StatusOK, set)
			return
		}
		select {
		case <-moved:
		case <-timer.C:
			w.WriteHeader(http.StatusNotModified)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (f *fakeFleet) status(w http.ResponseWriter, _ *http.Request, body []byte) {
	var rep private.HubStatusReport
	if err := json.Unmarshal(body, &rep); err != nil {
		f.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	if f.refuseFailures && rep.Failures != nil {
		f.mu.Unlock()
		f.writeError(w, http.StatusBadRequest, "request body has an error: property \"failures\" is unsupported")
		return
	}
	f.statuses = append(f.statuses, rep)
	f.applied = max(f.applied, min(rep.AppliedRevision, f.revision))
	ack := private.HubStatusAck{Kind: private.HubStatusAckKindHubStatusAck, HubId: f.hubID, Revision: f.revision,
		AppliedRevision: f.applied, RevisionHistory: fakeOptional(f.revisionHistory), ResyncRequested: f.resyncOnce}
	f.resyncOnce = false
	f.mu.Unlock()
	writeJSONFake(w, http.StatusOK, ack)
}

func (f *fakeFleet) inventory(w http.ResponseWriter, _ *http.Request, body []byte) {
	var b private.InventoryBatch
	if err := json.Unmarshal(body, &b); err != nil {
		f.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, b)
	if f.stored == nil {
		f.stored = map[string]string{}
	}
	ack := private.InventoryAck{Kind: private.InventoryAckKindInventoryAck, Written: len(b.Upserts), Deleted: len(b.Deletes),
		Resend: []string{}, ContentHashes: map[string]string{}}
	for _, u := range b.Upserts {
		h := agentapi.Summary(u).ContentHash()
		f.stored[u.Name], ack.ContentHashes[u.Name] = h, h
	}
	if b.Present != nil {
		for _, p := range *b.Present {
			if f.stored[p.Name] == p.ContentHash && !f.forget[p.Name] {
				ack.Confirmed++
			} else {
				ack.Resend = append(ack.Resend, p.Name)
			}
		}
	}
	for _, d := range b.Deletes {
		delete(f.stored, d)
	}
	writeJSONFake(w, http.StatusOK, ack)
}

// resourceBatch stores a batch of another kind as inventory stores one of
// ManagedClusters, by kind and key.
func (f *fakeFleet) resourceBatch(w http.ResponseWriter, _ *http.Request, body []byte) {
	var b private.ResourceBatch
	if err := json.Unmarshal(body, &b); err != nil {
		f.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resources = append(f.resources, b)
	if f.stored == nil {
		f.stored = map[string]string{}
	}
	ack := private.InventoryAck{Kind: private.InventoryAckKindInventoryAck, Written: len(b.Upserts), Deleted: len(b.Deletes),
		Resend: []string{}, ContentHashes: map[string]string{}}
	for _, u := range b.Upserts {
		key, h := agentapi.Object(u).Key(), fleet.ResourceContentHash(u.Body)
		f.stored[b.Kind+" "+key], ack.ContentHashes[key] = h, h
	}
	if b.Present != nil {
		for _, p := range *b.Present {
			if f.stored[b.Kind+" "+p.Key] == p.ContentHash && !f.forget[p.Key] {
				ack.Confirmed++
			} else {
				ack.Resend = append(ack.Resend, p.Key)
			}
		}
	}
	for _, d := range b.Deletes {
		delete(f.stored, b.Kind+" "+d)
	}
	writeJSONFake(w, http.StatusOK, ack)
}

func (f *fakeFleet) registrations(w http.ResponseWriter, _ *http.Request, body []byte) {
	var b private.RegistrationStatusBatch
	if err := json.Unmarshal(body, &b); err != nil {
		f.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	f.regItems = append(f.regItems, b.Items...)
	f.mu.Unlock()
	writeJSONFake(w, http.StatusOK, private.RegistrationStatusAck{Kind: private.RegistrationStatusAckKindRegistrationStatusAck, Updated: len(b.Items)})
}

// nextWait returns a channel closed when the next long-poll starts waiting
// for a change: a change made after it is closed wakes that long-poll.
func (f *fakeFleet) nextWait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waited = make(chan struct{})
	return f.waited
}

// setDesired makes regs the hub's desired set at a new revision, and returns it.
func (f *fakeFleet) setDesired(regs ...private.DesiredRegistration) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.regs = regs
	f.revision++
	f.history[f.revision] = slices.Clone(regs)
	close(f.moved)
	f.moved = make(chan struct{})
	return f.revision
}

// restore plays a database restored to revision rev (whose set it keeps)
// in a new history: later revisions are forgotten, and the next ones count
// from rev again, as the fleet manager's do after a point-in-time recovery.
// Each of then is published next, all before a waiting long-poll wakes.
func (f *fakeFleet) restore(rev int64, history string, then ...[]private.DesiredRegistration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for r := range f.history {
		if r > rev {
			delete(f.history, r)
		}
	}
	f.revision, f.regs, f.revisionHistory = rev, slices.Clone(f.history[rev]), history
	f.applied = min(f.applied, rev)
	for _, regs := range then {
		f.revision++
		f.regs, f.history[f.revision] = regs, slices.Clone(regs)
	}
	close(f.moved)
	f.moved = make(chan struct{})
}

func fakeOptional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// desiredDelta makes whole the delta from base, the set of revision since:
// the entries not in base as they are, the ids of base's entries whole no
// longer holds.
func desiredDelta(whole private.DesiredSet, since int64, base []private.DesiredRegistration) private.DesiredSet {
	delta := whole
	delta.BaseRevision, delta.Registrations = &since, nil
	removed := []string{}
	for _, b := range base {
		if !slices.ContainsFunc(whole.Registrations, func(r private.DesiredRegistration) bool { return r.RegistrationId == b.RegistrationId }) {
			removed = append(removed, b.RegistrationId)
		}
	}
	for _, r := range whole.Registrations {
		if !slices.ContainsFunc(base, func(b private.DesiredRegistration) bool { return reflect.DeepEqual(b, r) }) {
			delta.Registrations = append(delta.Registrations, r)
		}
	}
	if delta.Registrations == nil {
		delta.Registrations = []private.DesiredRegistration{}
	}
	delta.RemovedRegistrations = &removed
	return delta
}

// desiredSinces returns the since of every desired-set request so far.
func (f *fakeFleet) desiredSinces() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sinces)
}

func (f *fakeFleet) appliedRevision() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fakeFleet) inventoryBatches() []private.InventoryBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func (f *fakeFleet) resourceBatches() []private.ResourceBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.resources)
}

func (f *fakeFleet) registrationItems() []private.RegistrationStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.regItems)
}

func (f *fakeFleet) heartbeats() []private.HubStatusReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.statuses)
}

func (f *fakeFleet) seenTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokens)
}

func (f *fakeFleet) failNext(op string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[op] = n
}

func (f *fakeFleet) limitBody(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxBody = n
}

func (f *fakeFleet) requestResync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resyncOnce = true
}

// upserted returns the names the batches reported present, deleted those
// reported gone, in order.
func upserted(batches []private.InventoryBatch) (up, del []string) {
	for _, b := range batches {
		for _, s := range b.Upserts {
			up = append(up, s.Name)
		}
		del = append(del, b.Deletes...)
	}
	return up, del
}

// latestItem returns the last status reported for registration id.
func latestItem(items []private.RegistrationStatus, id string) (private.RegistrationStatus, bool) {
	for _, it := range slices.Backward(items) {
		if it.RegistrationId == id {
			return it, true
		}
	}
	return private.RegistrationStatus{}, false
}
