package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/dnstest"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The benchmark's sizes: the records the writer creates through the API
// and its concurrent clients, the other records of the fleet seeded in the
// database, and the requests timed per read or write operation.
const (
	dnsBenchRecords = 1000
	dnsBenchClients = 8
	dnsBenchFleet   = 299000
	dnsBenchSamples = 200
	// dnsBenchReadyTimeout bounds the wait for every record to be ready.
	dnsBenchReadyTimeout = 3 * time.Minute
	// dnsBenchPageSize is the page the list operations and the checks read.
	dnsBenchPageSize = 100
)

// The benchmark's zone, service and organisations.
const (
	dnsBenchZone    = "bench.e2e.example.com"
	dnsBenchService = "bench"
	dnsBenchOrg     = "org-bench"
)

// dnsBenchSeedSQL fills the fleet with $1 records besides the benchmark's:
// three zones of ten services each, many organisations; a tenth of the
// records are other organisations' in the benchmark's own service ($2,
// zone $3, subtree $4) and another tenth are the writer's ($5) in the other
// services. Every one is published and ready, with no pass due, so dns_mgr
// never looks at them (the sizes are the SQL's own).
const dnsBenchSeedSQL = `
INSERT INTO dns_zones (id, name, provider, settings) SELECT 'seed-z-' || i, 'zone-' || i || '.seed.example', 'rfc2136', '{}' FROM generate_series(0, 2) i;
INSERT INTO dns_services (id, name, zone_id, subdomain, name_template, record_types, min_ttl, max_ttl, default_ttl)
SELECT 'seed-svc-' || i, 'seed-svc-' || i, 'seed-z-' || i % 3, 'seed-svc-' || i, '{instance}', '["CNAME", "A", "AAAA"]', 5, 86400, 300
FROM generate_series(0, 29) i;
INSERT INTO dns_records (id, service_id, zone_id, org_id, instance, name, type, ttl, targets, conditions, phase, published,
	published_generation, next_pass_at, created_at)
SELECT 'seed-rec-' || i, r.service_id, r.zone_id, r.org_id, 's' || i, 's' || i || '.' || r.subtree, 'CNAME', 300,
	'["lb.example.net"]', $6::jsonb, 'ready', '{"name": "x", "type": "CNAME", "ttl": 300, "values": ["lb.example.net"]}', 1, NULL,
	timestamptz '2026-01-01' + i * interval '1 second'
FROM generate_series(0, $1 - 1) i, LATERAL (SELECT
	CASE WHEN i % 10 = 0 THEN $2::text ELSE 'seed-svc-' || i % 30 END AS service_id,
	CASE WHEN i % 10 = 0 THEN $3::text ELSE 'seed-z-' || i % 30 % 3 END AS zone_id,
	CASE WHEN i % 10 = 1 THEN $5::text ELSE 'org-' || i % 300 END AS org_id,
	CASE WHEN i % 10 = 0 THEN $4::text ELSE 'seed-svc-' || i % 30 || '.zone-' || i % 30 % 3 || '.seed.example' END AS subtree) r`

// dnsBench is a fleet manager with the benchmark's zone onboarded (on a
// real BIND 9) and its service, written by dnsBenchOrg.
type dnsBench struct {
	fm        *fleetManager
	public    *public.ClientWithResponses
	server    string
	service   admin.DNSService
	admin     string
	writer    string
	created   int // the writer's records so far
	iteration int
}

// BenchmarkDNSRecordsToResolvable measures DNS records through the real
// fleet-manager binary against a real BIND 9 zone, on an empty fleet and on
// one of dnsBenchFleet other records seeded in the database.
//
// "resolvable": dnsBenchClients clients create dnsBenchRecords A records
// through the public API; from the first create until every record is
// ready (the last Resolvable transition), in records/s, with the creates'
// latency. Every record must end ready and BIND must answer each name.
//
// The others, as the writer with its records: dnsBenchSamples requests one
// after the other of a list page, a list with a search and an order, a get,
// an idempotent create (the same body again), the admin lists of services
// and zones, and a create of a new record (all of which must end ready).
//
//	make bench/dns
//	go test -run '^$' -bench BenchmarkDNSRecordsToResolvable -benchtime 1x -count 1 ./internal/e2e/
func BenchmarkDNSRecordsToResolvable(b *testing.B) {
	for _, fleetSize := range []struct {
		name   string
		seeded int
	}{{"fleet=empty", 0}, {fmt.Sprintf("fleet=%d", dnsBenchFleet+dnsBenchRecords), dnsBenchFleet}} {
		b.Run(fleetSize.name, func(b *testing.B) {
			d := startDNSBench(b, fleetSize.seeded)
			b.Run("resolvable", d.toResolvable)
			id := d.someRecord(b)
			for _, op := range []struct {
				name string
				want int
				call func(i int) (int, []byte, error)
			}{
				{"list", http.StatusOK, func(int) (int, []byte, error) {
					r, err := d.public.ListDNSRecordsWithResponse(context.Background(), dnsBenchService,
						&public.ListDNSRecordsParams{Size: ptr(dnsBenchPageSize)}, bearer(d.writer))
					return reply(r, err)
				}},
				{"list-search-order", http.StatusOK, func(int) (int, []byte, error) {
					r, err := d.public.ListDNSRecordsWithResponse(context.Background(), dnsBenchService, &public.ListDNSRecordsParams{
						Size: ptr(dnsBenchPageSize), Search: ptr("phase = 'ready'"), OrderBy: ptr("instance desc")}, bearer(d.writer))
					return reply(r, err)
				}},
				{"get", http.StatusOK, func(int) (int, []byte, error) {
					r, err := d.public.GetDNSRecordWithResponse(context.Background(), dnsBenchService, id, bearer(d.writer))
					return reply(r, err)
				}},
				{"create-repeat", http.StatusOK, func(int) (int, []byte, error) {
					r, err := d.public.CreateDNSRecordWithResponse(context.Background(), dnsBenchService, d.recordCreate(0, 0), bearer(d.writer))
					return reply(r, err)
				}},
				{"admin-list-services", http.StatusOK, func(int) (int, []byte, error) {
					r, err := d.fm.Admin.ListDNSServicesWithResponse(context.Background(), nil, bearer(d.admin))
					return reply(r, err)
				}},
				{"admin-list-zones", http.StatusOK, func(int) (int, []byte, error) {
					r, err := d.fm.Admin.ListDNSZonesWithResponse(context.Background(), nil, bearer(d.admin))
					return reply(r, err)
				}},
				{"create-new", http.StatusCreated, func(i int) (int, []byte, error) {
					r, err := d.public.CreateDNSRecordWithResponse(context.Background(), dnsBenchService,
						d.recordCreate(d.iteration, i), bearer(d.writer))
					if err == nil && r.StatusCode() == http.StatusCreated {
						d.created++
					}
					return reply(r, err)
				}},
			} {
				b.Run(op.name, func(b *testing.B) {
					d.sample(b, op.name, op.want, op.call)
				})
			}
			// The new records are published and answered as the first were.
			d.waitReady(b, dnsBenchReadyTimeout)
			d.answered(b, fmt.Sprintf("i%d-", d.iteration))
		})
	}
}

// startDNSBench starts BIND, the fleet manager on a migrated database,
// onboards the benchmark's zone and service, and seeds seeded records.
func startDNSBench(b *testing.B, seeded int) *dnsBench {
	b.Helper()
	bind := dnstest.StartBIND(b, dnsBenchZone)
	db, cfg := pgtest.NewMigratedDatabase(b)
	fm := startFleetManagerOn(b, hydratest.Start(b), cfg)
	// The generated client over connections kept for every client at once.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: dnsBenchClients}}
	pub, err := public.NewClientWithResponses(fm.Base, public.WithHTTPClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	d := &dnsBench{fm: fm, public: pub, server: bind.Addr, admin: fm.token("sre", "bob", "fleet-admin"),
		writer: fm.token(dnsBenchOrg, "ann", "org-member")}
	ctx := context.Background()
	zone, err := fm.Admin.CreateDNSZoneWithResponse(ctx, admin.DNSZoneCreate{Name: bind.Zone, Provider: admin.DNSProviderRFC2136,
		Rfc2136:     &admin.RFC2136Settings{Server: bind.Addr, TsigKeyName: bind.KeyName, TsigAlgorithm: admin.RFC2136SettingsTsigAlgorithm(bind.Algorithm)},
		Credentials: &admin.DNSCredentials{TsigSecret: &bind.Secret}}, bearer(d.admin))
	if err != nil || zone.JSON201 == nil {
		code, raw, _ := reply(zone, err)
		b.Fatalf("CreateDNSZone = %d %s, %v", code, raw, err)
	}
	svc, err := fm.Admin.CreateDNSServiceWithResponse(ctx, admin.DNSServiceCreate{Name: dnsBenchService, ZoneId: zone.JSON201.Id,
		WriterOrganizations: &[]string{dnsBenchOrg}, RecordTypes: &[]admin.DNSRecordType{admin.DNSRecordA}}, bearer(d.admin))
	if err != nil || svc.JSON201 == nil {
		code, raw, _ := reply(svc, err)
		b.Fatalf("CreateDNSService = %d %s, %v", code, raw, err)
	}
	d.service = *svc.JSON201

	pool, err := db.Gorm.DB()
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if seeded > 0 {
		// One statement, longer than the pool's statement timeout, whose
		// rows are consistent: their foreign keys are not checked one by one.
		if _, err := conn.ExecContext(ctx, "SET statement_timeout = 0; SET session_replication_role = replica"); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for _, stmt := range strings.Split(dnsBenchSeedSQL, ";\n") {
			var args []any
			if strings.Contains(stmt, "$1") {
				args = []any{seeded, d.service.Id, d.service.ZoneId, d.service.Subdomain + "." + bind.Zone, dnsBenchOrg, dnsSeedConditions}
			}
			if _, err := conn.ExecContext(ctx, stmt, args...); err != nil {
				b.Fatalf("seeding: %v\n%s", err, stmt)
			}
		}
		b.Logf("seeded %d DNS records in %s", seeded, time.Since(start).Round(time.Millisecond))
		if _, err := conn.ExecContext(ctx, "RESET statement_timeout; RESET session_replication_role"); err != nil {
			b.Fatal(err)
		}
	}
	// As autovacuum leaves a table that has settled; the checkpoint keeps
	// the seed's writes out of the measured phases.
	for _, stmt := range []string{"VACUUM (ANALYZE) dns_records, dns_services, dns_zones", "CHECKPOINT"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			b.Fatalf("%s: %v", stmt, err)
		}
	}
	return d
}

// dnsSeedConditions are a published, resolvable record's conditions.
var dnsSeedConditions = func() string {
	var conds []string
	for _, c := range []string{fleet.DNSConditionAccepted, fleet.DNSConditionPublished, fleet.DNSConditionResolvable} {
		conds = append(conds, `{"type": "`+c+`", "status": "True", "reason": "`+c+`", "message": "", "observed_generation": 1,
			"last_transition_time": "2026-01-01T00:00:00Z"}`)
	}
	return "[" + strings.Join(conds, ", ") + "]"
}()

// recordCreate is the writer's record i of iteration: an A record of an
// address of its own.
func (d *dnsBench) recordCreate(iteration, i int) public.DNSRecordCreate {
	return public.DNSRecordCreate{Instance: fmt.Sprintf("i%d-%d", iteration, i), Type: ptr(public.DNSRecordA),
		Targets: &[]string{fmt.Sprintf("10.%d.%d.%d", iteration%256, i/256%256, i%256)}}
}

// toResolvable creates dnsBenchRecords records b.N times from
// dnsBenchClients clients and waits until each is ready and answered.
// Besides the rate and the creates' latency, it reports how long after the
// last create's answer the last record was ready, and dns_mgr's passes of
// the zone meanwhile with their mean duration.
func (d *dnsBench) toResolvable(b *testing.B) {
	var latencies []time.Duration
	var elapsed, tail time.Duration
	passes, seconds := d.dnsPasses(b)
	for range b.N {
		took, after, lat := d.createAll(b)
		latencies = append(latencies, lat...)
		elapsed += took
		tail += after
		d.iteration++
	}
	passesAfter, secondsAfter := d.dnsPasses(b)
	b.ReportMetric(float64(b.N*dnsBenchRecords)/elapsed.Seconds(), "records/s")
	b.ReportMetric(ms(failoverPercentile(latencies, 50)), "create-p50-ms")
	b.ReportMetric(ms(failoverPercentile(latencies, 99)), "create-p99-ms")
	b.ReportMetric(ms(tail/time.Duration(b.N)), "tail-ms")
	b.ReportMetric((passesAfter-passes)/float64(b.N), "passes")
	if n := passesAfter - passes; n > 0 {
		b.ReportMetric((secondsAfter-seconds)/n*1000, "pass-mean-ms")
	}
}

// dnsPasses scrapes the fleet manager's metrics: how many zone passes
// dns_mgr made, and their seconds in all.
func (d *dnsBench) dnsPasses(b *testing.B) (count, seconds float64) {
	b.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", d.fm.metrics))
	if err != nil {
		b.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `reconciler="dns_mgr"`) {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatalf("metric line %q: %v", line, err)
		}
		switch {
		case strings.HasSuffix(name, "_reconcile_duration_seconds_count"):
			count += v
		case strings.HasSuffix(name, "_reconcile_duration_seconds_sum"):
			seconds += v
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("reading /metrics: %v", err)
	}
	return count, seconds
}

// createAll is one iteration of toResolvable: the time from the first
// create to the last record's Resolvable transition, the time from the last
// create's answer to it, and the creates' latencies.
func (d *dnsBench) createAll(b *testing.B) (total, tail time.Duration, latencies []time.Duration) {
	b.Helper()
	next := make(chan int, dnsBenchRecords)
	for i := range dnsBenchRecords {
		next <- i
	}
	close(next)
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for range dnsBenchClients {
		wg.Go(func() {
			for i := range next {
				began := time.Now()
				r, err := d.public.CreateDNSRecordWithResponse(context.Background(), dnsBenchService, d.recordCreate(d.iteration, i), bearer(d.writer))
				took := time.Since(began)
				mu.Lock()
				if err != nil || r.StatusCode() != http.StatusCreated {
					code, raw, _ := reply(r, err)
					failures = append(failures, fmt.Sprintf("%d: %d %s %v", i, code, raw, err))
				} else {
					latencies = append(latencies, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	created := time.Since(start)
	if len(failures) > 0 {
		b.Fatalf("%d of %d creates failed, e.g. %s", len(failures), dnsBenchRecords, failures[0])
	}
	d.created += dnsBenchRecords
	d.waitReady(b, dnsBenchReadyTimeout)
	b.StopTimer()

	// The end is the last record's Resolvable transition, which dns_mgr
	// records when BIND answered it.
	last, checked := d.answered(b, fmt.Sprintf("i%d-", d.iteration))
	if checked != dnsBenchRecords {
		b.Fatalf("%d records of iteration %d, want %d", checked, d.iteration, dnsBenchRecords)
	}
	b.Logf("created %d records in %s; the last ready %s after the first create", dnsBenchRecords,
		created.Round(time.Millisecond), last.Sub(start).Round(time.Millisecond))
	return last.Sub(start), last.Sub(start.Add(created)), latencies
}

// answered checks that each of the writer's records whose instance has
// prefix is ready and that BIND answers its name with its addresses; it
// returns the last of their Resolvable transitions and how many there are.
func (d *dnsBench) answered(b *testing.B, prefix string) (last time.Time, n int) {
	b.Helper()
	g := gomega.NewWithT(b)
	for _, rec := range d.records(b) {
		if !strings.HasPrefix(rec.Instance, prefix) {
			continue
		}
		n++
		g.Expect(rec.Phase).To(gomega.Equal(public.DNSRecordReady), rec.Name)
		i := slices.IndexFunc(rec.Conditions, func(c public.Condition) bool { return c.Type == fleet.DNSConditionResolvable })
		g.Expect(i).NotTo(gomega.Equal(-1), rec.Name)
		if t := rec.Conditions[i].LastTransitionTime; t.After(last) {
			last = t
		}
		g.Expect(answer(g, d.server, rec.Name, dns.TypeA)).To(gomega.Equal(rec.Targets), rec.Name)
	}
	if n == 0 {
		b.Fatalf("no record of the writer's has an instance starting %q", prefix)
	}
	return last, n
}

// waitReady waits until every one of the writer's records is ready.
func (d *dnsBench) waitReady(b *testing.B, timeout time.Duration) {
	b.Helper()
	var ready, total int
	gomega.NewWithT(b).Eventually(func(g gomega.Gomega) {
		all, err := d.public.ListDNSRecordsWithResponse(context.Background(), dnsBenchService, &public.ListDNSRecordsParams{Size: ptr(1)}, bearer(d.writer))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(all.JSON200).NotTo(gomega.BeNil(), string(all.Body))
		r, err := d.public.ListDNSRecordsWithResponse(context.Background(), dnsBenchService,
			&public.ListDNSRecordsParams{Size: ptr(1), Search: ptr("phase = 'ready'")}, bearer(d.writer))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(r.JSON200).NotTo(gomega.BeNil(), string(r.Body))
		ready, total = r.JSON200.Total, all.JSON200.Total
		g.Expect(total).To(gomega.Equal(d.created))
		g.Expect(ready).To(gomega.Equal(d.created))
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(gomega.Succeed(), func() string {
		return fmt.Sprintf("%d of %d records ready (%d expected)", ready, total, d.created)
	})
}

// records reads every one of the writer's records, a page at a time.
func (d *dnsBench) records(b *testing.B) []public.DNSRecord {
	b.Helper()
	var out []public.DNSRecord
	for page := 1; ; page++ {
		r, err := d.public.ListDNSRecordsWithResponse(context.Background(), dnsBenchService,
			&public.ListDNSRecordsParams{Page: ptr(page), Size: ptr(dnsBenchPageSize)}, bearer(d.writer))
		if err != nil || r.JSON200 == nil {
			code, raw, _ := reply(r, err)
			b.Fatalf("ListDNSRecords(page %d) = %d %s, %v", page, code, raw, err)
		}
		out = append(out, r.JSON200.Items...)
		if len(r.JSON200.Items) < dnsBenchPageSize {
			return out
		}
	}
}

// someRecord is the id of the writer's first record.
func (d *dnsBench) someRecord(b *testing.B) string {
	b.Helper()
	r, err := d.public.ListDNSRecordsWithResponse(context.Background(), dnsBenchService, &public.ListDNSRecordsParams{
		Search: ptr("instance = 'i0-0'")}, bearer(d.writer))
	if err != nil || r.JSON200 == nil || len(r.JSON200.Items) != 1 {
		code, raw, _ := reply(r, err)
		b.Fatalf("finding i0-0 = %d %s, %v", code, raw, err)
	}
	return r.JSON200.Items[0].Id
}

// sample makes dnsBenchSamples calls b.N times, one after the other, each
// of which must answer want, and reports their latency.
func (d *dnsBench) sample(b *testing.B, name string, want int, call func(i int) (int, []byte, error)) {
	var latencies []time.Duration
	b.ResetTimer()
	for n := range b.N {
		for i := range dnsBenchSamples {
			began := time.Now()
			code, raw, err := call(n*dnsBenchSamples + i)
			took := time.Since(began)
			if err != nil || code != want {
				b.Fatalf("%s: %d %s, %v; want %d", name, code, raw, err, want)
			}
			latencies = append(latencies, took)
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(failoverPercentile(latencies, 50)), "p50-ms")
	b.ReportMetric(ms(failoverPercentile(latencies, 99)), "p99-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// reply is a generated client's answer: its status and body, or the
// request's error.
func reply[R interface{ StatusCode() int }](r R, err error) (int, []byte, error) {
	if err != nil {
		return 0, nil, err
	}
	return r.StatusCode(), reflect.ValueOf(r).Elem().FieldByName("Body").Bytes(), nil
}
