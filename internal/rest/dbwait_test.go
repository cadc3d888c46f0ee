package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/rest"
)

// waitMargin is what a request may take past --db-wait-timeout on a loaded
// machine under -race: the HTTP round trip, authentication, the error's
// answer.
const waitMargin = time.Second

// send is do for a goroutine: a transport error is returned, not fatal.
func (e *outageEnv) send(client *http.Client, method, path, body string) (outageAnswer, error) {
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		return outageAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return outageAnswer{elapsed: time.Since(start)}, err
	}
	defer resp.Body.Close()
	a := outageAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), elapsed: time.Since(start)}
	_ = json.NewDecoder(resp.Body).Decode(&a.body)
	return a, nil
}

// sendAll sends every request at once and returns the answers in order.
func (e *outageEnv) sendAll(client *http.Client, reqs []struct{ method, path, body string }) ([]outageAnswer, []error) {
	answers, errs := make([]outageAnswer, len(reqs)), make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = e.send(client, r.method, r.path, r.body)
		}()
	}
	wg.Wait()
	return answers, errs
}

// TestFrozenDatabaseAnswers503WithinTheWaitBound: with the database's
// processes stopped (SIGSTOP: connections stay open, nothing answers, not
// even a cancel request), every request started during the freeze answers
// 503 Unavailable with Retry-After within --db-wait-timeout (and a margin),
// long before --api-request-timeout; more requests than the pool has
// connections, so some wait for one. Once the server is thawed the service
// answers normally again: the connections the bound cut were not pooled.
func TestFrozenDatabaseAnswers503WithinTheWaitBound(t *testing.T) {
	t.Parallel()
	server := pgtest.StartServer(t)
	cfg := server.NewDatabase(t, "fleet")
	cfg.WaitTimeout = time.Second
	db := pgtest.Open(t, cfg)
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate(): %v", err)
	}
	httpCfg := rest.DefaultConfig()
	e := serveOutageEnv(t, httpCfg, db, cfg)
	for _, r := range outageRequests {
		if a := e.do(t, r.method, r.path, r.body); a.status >= 300 {
			t.Fatalf("%s %s before the freeze = %d %+v", r.method, r.path, a.status, a.body)
		}
	}

	server.Freeze()
	t.Cleanup(server.Thaw) // a failed assertion leaves no stopped processes behind
	var during []struct{ method, path, body string }
	for i := range 2 {
		for _, r := range outageRequests {
			body := strings.Replace(r.body, "during-outage", fmt.Sprintf("during-freeze-%d", i), 1)
			during = append(during, struct{ method, path, body string }{r.method, r.path, body})
		}
	}
	if open := cfg.MaxOpenConns; len(during) <= open {
		t.Fatalf("%d requests for a pool of %d: none would wait for a connection", len(during), open)
	}
	// Past this a request is held as it was before the bound: by the freeze.
	client := &http.Client{Timeout: cfg.WaitTimeout + 4*waitMargin}
	answers, errs := e.sendAll(client, during)
	var slowest time.Duration
	for i, r := range during {
		a := answers[i]
		slowest = max(slowest, a.elapsed)
		switch {
		case errs[i] != nil:
			t.Errorf("%s %s on a frozen database: no answer within %s: %v", r.method, r.path, client.Timeout, errs[i])
		case a.status != http.StatusServiceUnavailable || a.retryAfter == "" || a.body.Code != "FLEET-MGMT-10":
			t.Errorf("%s %s on a frozen database = %d (Retry-After %q) %+v, want 503 FLEET-MGMT-10 with Retry-After",
				r.method, r.path, a.status, a.retryAfter, a.body)
		case a.elapsed > cfg.WaitTimeout+waitMargin:
			t.Errorf("%s %s on a frozen database answered in %s, want within --db-wait-timeout %s and %s",
				r.method, r.path, a.elapsed, cfg.WaitTimeout, waitMargin)
		}
	}
	t.Logf("%d requests on a frozen database, --db-wait-timeout %s: the slowest answered in %s", len(during), cfg.WaitTimeout, slowest.Round(time.Millisecond))
	if logs := e.logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("log of the freeze:\n%s\nwant warnings, no error", logs)
	}

	server.Thaw()
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range outageRequests {
		body := strings.Replace(r.body, "during-outage", "after-thaw", 1)
		for {
			a, err := e.send(client, r.method, r.path, body)
			if err == nil && a.status < 300 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s after the thaw = %d %+v (%v), want a success within 10s", r.method, r.path, a.status, a.body, err)
			}
			<-time.After(100 * time.Millisecond)
		}
	}
	// A connection the freeze cut is never handed back in use; one that
	// an answered request or a wake-up after its commit still holds for a
	// moment is.
	gomega.NewWithT(t).Eventually(func() int { return db.SQL().Stats().InUse }).WithTimeout(5*time.Second).
		WithPolling(20*time.Millisecond).Should(gomega.BeZero(), func() string {
		return fmt.Sprintf("pool after the requests: %+v, want no connection in use", db.SQL().Stats())
	})
}

// TestLongPollsAndBatchesKeepTheirDeadline: while another session holds a
// lock on the registrations and the inventory for longer than
// --db-wait-timeout, an ordinary create and list answer 503 at the bound, and
// the batch create and the change feed's long-poll, whose statements may
// rightly take longer, wait the lock out and answer.
func TestLongPollsAndBatchesKeepTheirDeadline(t *testing.T) {
	t.Parallel()
	_, cfg := pgtest.NewMigratedDatabase(t)
	cfg.WaitTimeout = time.Second
	e := serveOutageEnv(t, rest.DefaultConfig(), pgtest.Open(t, cfg), cfg)
	requests := func(round string) []struct{ method, path, body string } {
		return []struct{ method, path, body string }{
			{"POST", "/clusters", `{"name":"one-` + round + `","zone":"eu","product":"OCP"}`},
			{"GET", "/managed_clusters", ""},
			{"POST", "/clusters:batch", `{"items":[{"name":"batch-` + round + `","zone":"eu","product":"OCP"}]}`},
			{"GET", "/managed_clusters/changes?wait=100ms", ""},
		}
	}
	const ordinary = 2 // the first two
	client := &http.Client{Timeout: time.Minute}
	for _, r := range requests("before") {
		if a, err := e.send(client, r.method, r.path, r.body); err != nil || a.status >= 300 {
			t.Fatalf("%s %s before the lock = %d %+v (%v)", r.method, r.path, a.status, a.body, err)
		}
	}

	ctx := context.Background()
	holder, err := pgx.Connect(ctx, cfg.DSN())
	if err != nil {
		t.Fatalf("connecting the lock's holder: %v", err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE registrations, managed_clusters IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatalf("taking the lock: %v", err)
	}
	held := 5 * cfg.WaitTimeout / 2
	released := make(chan error, 1)
	time.AfterFunc(held, func() { _, err := holder.Exec(ctx, "ROLLBACK"); released <- err })
	reqs := requests("locked")
	answers, errs := e.sendAll(client, reqs)
	if err := <-released; err != nil {
		t.Fatalf("releasing the lock: %v", err)
	}
	for i, r := range reqs {
		a := answers[i]
		switch {
		case errs[i] != nil:
			t.Errorf("%s %s under the lock: %v", r.method, r.path, errs[i])
		case i < ordinary && (a.status != http.StatusServiceUnavailable || a.retryAfter == "" || a.elapsed > cfg.WaitTimeout+waitMargin):
			t.Errorf("%s %s under a lock held %s = %d (Retry-After %q) after %s, want 503 with Retry-After within --db-wait-timeout %s and %s",
				r.method, r.path, held, a.status, a.retryAfter, a.elapsed, cfg.WaitTimeout, waitMargin)
		case i >= ordinary && (a.status >= 300 || a.elapsed < cfg.WaitTimeout):
			t.Errorf("%s %s under a lock held %s = %d %+v after %s, want a success once the lock is released, past --db-wait-timeout %s",
				r.method, r.path, held, a.status, a.body, a.elapsed, cfg.WaitTimeout)
		}
	}
}
