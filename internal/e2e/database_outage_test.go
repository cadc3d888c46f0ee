package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// newOwnedDBStack is newStack on a PostgreSQL server the test owns, which it
// may restart, crash or freeze; the hub takes a thousand registrations.
func newOwnedDBStack(t *testing.T, name string, extra ...string) (*stack, *pgtest.Server) {
	t.Helper()
	server := pgtest.StartServer(t)
	hydra := hydratest.Start(t)
	hub := testHub(t)
	fm := startFleetManagerOn(t, hydra, server.NewDatabase(t, "fleet"), extra...)
	s := &stack{t: t, g: gomega.NewWithT(t), fm: fm, hub: hub,
		admin: fm.token("sre", "bob", "fleet-admin"), user: fm.token("org-"+name, "ann")}
	s.creds = newAgentCredentials(t, hydra, name+"-agent")
	resp, err := fm.Admin.CreateHubWithResponse(context.Background(), admin.HubCreate{Name: name, Zone: "eu", Region: "eu-west-1",
		DeliveryMode: admin.Agent, Capacity: 1000, AgentIdentity: &s.creds.clientID}, bearer(s.admin))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateHub(%s) = %v %s, %v", name, resp.StatusCode(), resp.Body, err)
	}
	s.hubID = resp.JSON201.Id
	// No import controller: these tests ask for delivery alone, and a
	// klusterlet for each of hundreds of registrations would load the
	// machine the outages are measured on. OCM's registration controller
	// still accepts each ManagedCluster the agent delivers.
	s.agent = startAgent(t, fm, hub, s.hubID, s.creds)
	s.waitHubReady(fleet.ConditionTrue)
	return s, server
}

// outageFlags bound what a request and a statement may take, and a connect.
var outageFlags = []string{"--api-request-timeout=3s", "--db-statement-timeout=3s", "--db-connect-timeout=1s"}

// loadAnswer is one request of the load.
type loadAnswer struct {
	op         string // "create" or "list"
	status     int    // 0: no answer (transport error)
	retryAfter bool
	start, end time.Time
	id         string // the registration a 202 acknowledged
}

// load runs writers creating registrations and readers listing them, each
// at a steady pace, until stop is closed; it returns every answer.
type load struct {
	fm   *fleetManager
	user string
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	all  []loadAnswer
}

func startLoad(fm *fleetManager, user, prefix string, writers, readers int, pace time.Duration) *load {
	l := &load{fm: fm, user: user, stop: make(chan struct{})}
	client := &http.Client{Timeout: 30 * time.Second}
	run := func(op string, request func(i int) *http.Request) {
		defer l.wg.Done()
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			req := request(i)
			req.Header.Set("Authorization", "Bearer "+user)
			a := loadAnswer{op: op, start: time.Now()}
			resp, err := client.Do(req)
			a.end = time.Now()
			if err == nil {
				a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After") != ""
				var body struct {
					ID string `json:"id"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				_ = resp.Body.Close()
				if a.status == http.StatusAccepted {
					a.id = body.ID
				}
			}
			l.mu.Lock()
			l.all = append(l.all, a)
			l.mu.Unlock()
		}
	}
	for w := range writers {
		l.wg.Add(1)
		go run("create", func(i int) *http.Request {
			body := fmt.Sprintf(`{"name":"%s-%d-%d","zone":"eu","product":"ROSA"}`, prefix, w, i)
			req, _ := http.NewRequest(http.MethodPost, fm.Base+"/clusters", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			return req
		})
	}
	for range readers {
		l.wg.Add(1)
		go run("list", func(int) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, fm.Base+"/clusters?size=10", nil)
			return req
		})
	}
	return l
}

// finish stops the load and returns its answers.
func (l *load) finish() []loadAnswer {
	close(l.stop)
	l.wg.Wait()
	return l.all
}

// outageFigures sums up a load run around a fault.
type outageFigures struct {
	byStatus map[string]int // "create 202", "list 503", ...
	// wrong lists the answers an outage must not give: a 5xx but a 503 with
	// Retry-After, or no answer at all.
	wrong []loadAnswer
	// outage is from the first failed answer to the last one; recovered is
	// from the end of the fault to the first success after it.
	outage, recovered time.Duration
	slowest           time.Duration
	acked             map[string]time.Time
}

func summarize(answers []loadAnswer, faultEnd time.Time) outageFigures {
	f := outageFigures{byStatus: map[string]int{}, acked: map[string]time.Time{}}
	var firstFail, lastFail, firstOK time.Time
	for _, a := range answers {
		f.byStatus[fmt.Sprintf("%s %d", a.op, a.status)]++
		f.slowest = max(f.slowest, a.end.Sub(a.start))
		ok := a.status >= 200 && a.status < 300
		if !ok && (a.status != http.StatusServiceUnavailable || !a.retryAfter) {
			f.wrong = append(f.wrong, a)
		}
		if !ok {
			if firstFail.IsZero() || a.end.Before(firstFail) {
				firstFail = a.end
			}
			if a.end.After(lastFail) {
				lastFail = a.end
			}
		}
		if ok && a.start.After(faultEnd) && (firstOK.IsZero() || a.end.Before(firstOK)) {
			firstOK = a.end
		}
		if a.id != "" {
			f.acked[a.id] = a.end
		}
	}
	if !firstFail.IsZero() {
		f.outage = lastFail.Sub(firstFail)
	}
	if !firstOK.IsZero() {
		f.recovered = firstOK.Sub(faultEnd)
	}
	return f
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reportWrong fails t with the answers an outage must not give, the first
// few of them.
func reportWrong(t *testing.T, wrong []loadAnswer, faultStart time.Time) {
	t.Helper()
	for i, a := range wrong {
		if i == 5 {
			t.Errorf("... %d wrong answers in all", len(wrong))
			return
		}
		t.Errorf("%s answered %d (Retry-After %v) %s after the fault began; want 2xx or 503 with Retry-After",
			a.op, a.status, a.retryAfter, a.end.Sub(faultStart).Round(time.Millisecond))
	}
}

// deliveries waits until every acknowledged registration is Delivered True
// (its agent applied it) and returns how long after its acknowledgement
// each was first seen so; it fails t when some never are within timeout.
func (s *stack) deliveries(acked map[string]time.Time, timeout time.Duration) map[string]time.Duration {
	s.t.Helper()
	seen := map[string]time.Duration{}
	deadline := time.Now().Add(timeout)
	for len(seen) < len(acked) && time.Now().Before(deadline) {
		for page := 1; ; page++ {
			resp, err := s.fm.Public.ListClustersWithResponse(context.Background(), &public.ListClustersParams{Page: ptr(page), Size: ptr(100)}, bearer(s.user))
			if err != nil || resp.JSON200 == nil {
				break
			}
			now := time.Now()
			for _, c := range resp.JSON200.Items {
				at, ok := acked[c.Id]
				if _, done := seen[c.Id]; !ok || done {
					continue
				}
				for _, cond := range c.Conditions {
					if cond.Type == fleet.ConditionDelivered && cond.Status == public.ConditionStatusTrue {
						seen[c.Id] = now.Sub(at)
					}
				}
			}
			if len(resp.JSON200.Items) < 100 {
				break
			}
		}
		<-time.After(250 * time.Millisecond) // the polling interval of this wait
	}
	if len(seen) < len(acked) {
		s.t.Errorf("%d of %d acknowledged registrations not delivered within %s", len(acked)-len(seen), len(acked), timeout)
	}
	return seen
}

// writesLost returns the acknowledged registrations the API no longer has.
func (s *stack) writesLost(acked map[string]time.Time) int {
	lost := 0
	for id := range acked {
		if _, code := s.cluster(id); code != http.StatusOK {
			lost++
		}
	}
	return lost
}

// TestDatabaseRestartAndCrashUnderWriteLoad: PostgreSQL restarted
// (`pg_ctl restart -m fast`) or crashed (`-m immediate`), down for four
// seconds, while users create and list clusters. During the outage the API answers 503 with
// Retry-After, never a 500; no acknowledged registration is lost; each is
// delivered promptly once the database is back.
func TestDatabaseRestartAndCrashUnderWriteLoad(t *testing.T) {
	for _, mode := range []struct {
		name      string
		immediate bool
	}{{"restart-fast", false}, {"crash-immediate", true}} {
		t.Run(mode.name, func(t *testing.T) {
			s, server := newOwnedDBStack(t, "hub-e2e-"+mode.name, outageFlags...)
			l := startLoad(s.fm, s.user, mode.name, 2, 2, 200*time.Millisecond)
			<-time.After(2 * time.Second) // load before the fault
			faultStart := time.Now()
			server.Stop(mode.immediate)
			<-time.After(4 * time.Second) // the database stays down as long as a loaded server's restart takes
			server.Start()
			faultEnd := time.Now()
			<-time.After(3 * time.Second) // load after the fault
			f := summarize(l.finish(), faultEnd)
			reportWrong(t, f.wrong, faultStart)
			if f.recovered == 0 || f.recovered > 5*time.Second {
				t.Errorf("first success %s after the database was back, want within 5s", f.recovered)
			}
			lost := s.writesLost(f.acked)
			if lost != 0 {
				t.Errorf("%d acknowledged registrations lost", lost)
			}
			delays := s.deliveries(f.acked, 60*time.Second)
			// afterBack is a delivery's wait counted from the database's
			// return for what was acknowledged before it.
			slowest, afterBack, late := time.Duration(0), time.Duration(0), 0
			for id, d := range delays {
				slowest = max(slowest, d)
				afterBack = max(afterBack, f.acked[id].Add(d).Sub(later(f.acked[id], faultEnd)))
				if d > 15*time.Second {
					late++
				}
			}
			if late > 0 {
				t.Errorf("%d registrations delivered more than 15s after their acknowledgement (slowest %s)", late, slowest)
			}
			t.Logf("%s: fault %s; answers %v; outage seen by clients %s; first success %s after the database was back; "+
				"slowest answer %s; %d acknowledged, %d lost; slowest delivery %s after acknowledgement, %s after the database was back; %d later than 15s",
				mode.name, faultEnd.Sub(faultStart).Round(time.Millisecond), f.byStatus, f.outage.Round(time.Millisecond),
				f.recovered.Round(time.Millisecond), f.slowest.Round(time.Millisecond), len(f.acked), lost, slowest.Round(time.Millisecond),
				afterBack.Round(time.Millisecond), late)
		})
	}
}

// TestFrozenDatabaseAnswers503WithinTheDeadline: with PostgreSQL frozen
// (SIGSTOP), every request answers within --api-request-timeout, 503 with
// Retry-After, and the service answers again as soon as it is thawed.
func TestFrozenDatabaseAnswers503WithinTheDeadline(t *testing.T) {
	server := pgtest.StartServer(t)
	fm := startFleetManagerOn(t, hydratest.Start(t), server.NewDatabase(t, "fleet"), outageFlags...)
	user := fm.token("org-frozen", "ann")
	l := startLoad(fm, user, "frozen", 2, 2, 200*time.Millisecond)
	<-time.After(time.Second) // load before the freeze
	freezeStart := time.Now()
	server.Freeze()
	<-time.After(6 * time.Second) // the freeze lasts twice the request deadline
	server.Thaw()
	thawed := time.Now()
	<-time.After(3 * time.Second) // load after the thaw
	f := summarize(l.finish(), thawed)
	reportWrong(t, f.wrong, freezeStart)
	if f.slowest > 4*time.Second {
		t.Errorf("slowest answer took %s, want within the 3s request deadline (and a second's margin)", f.slowest)
	}
	if f.byStatus["create 503"]+f.byStatus["list 503"] == 0 {
		t.Errorf("answers %v: no 503 during a 6s freeze", f.byStatus)
	}
	if f.recovered == 0 || f.recovered > 5*time.Second {
		t.Errorf("first success %s after the thaw, want within 5s", f.recovered)
	}
	t.Logf("freeze 6s: answers %v; slowest answer %s; first success %s after the thaw",
		f.byStatus, f.slowest.Round(time.Millisecond), f.recovered.Round(time.Millisecond))
}

// TestTwoPooledConnectionsUnder32Clients: with a pool of two connections
// (the reconcilers share it), 32 clients creating, reading and listing at
// once all get their answers: no statement waits on a second connection
// while holding the first.
func TestTwoPooledConnectionsUnder32Clients(t *testing.T) {
	fm := startFleetManager(t, hydratest.Start(t), "--db-max-open-conns=2", "--db-max-idle-conns=2")
	user := fm.token("org-pool", "ann")
	client := &http.Client{Timeout: 60 * time.Second}
	var mu sync.Mutex
	statuses, slowest := map[int]int{}, time.Duration(0)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				for _, req := range poolRequests(fm.Base, fmt.Sprintf("pool-%d-%d", c, i)) {
					req.Header.Set("Authorization", "Bearer "+user)
					began := time.Now()
					resp, err := client.Do(req)
					status := 0
					if err == nil {
						status = resp.StatusCode
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
					mu.Lock()
					statuses[status]++
					slowest = max(slowest, time.Since(began))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for status, n := range statuses {
		if status < 200 || status >= 300 {
			t.Errorf("%d answers with status %d, want every one 2xx", n, status)
		}
	}
	t.Logf("32 clients, 2 connections: answers %v in %s; slowest %s", statuses, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond))
}

// poolRequests are one client's round: a create, a list and a search.
func poolRequests(base, name string) []*http.Request {
	create, _ := http.NewRequest(http.MethodPost, base+"/clusters", strings.NewReader(`{"name":"`+name+`","zone":"eu","product":"ROSA"}`))
	create.Header.Set("Content-Type", "application/json")
	list, _ := http.NewRequest(http.MethodGet, base+"/clusters?size=20", nil)
	search, _ := http.NewRequest(http.MethodGet, base+"/clusters?search="+url.QueryEscape("name = '"+name+"'"), nil)
	return []*http.Request{create, list, search}
}
