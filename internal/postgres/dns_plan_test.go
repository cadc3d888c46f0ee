package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// dnsPlanRecords is how many records the plan test's fleet holds: enough
// for PostgreSQL to prefer an index wherever one serves.
const dnsPlanRecords = 300000

// seedDNSFleetSQL is a few zones of several services each and $1 records:
// org-big holds a tenth of them, all in svc-0 (some following its pool
// cluster cl-big), the others are spread over many organisations and every
// service. A few records are due; the others are at rest, their conditions
// as wide as a published record's (the sizes are the SQL's own).
const seedDNSFleetSQL = `
INSERT INTO dns_zones (id, name, provider, settings) SELECT 'z-' || i, 'zone-' || i || '.example', 'rfc2136', '{}' FROM generate_series(0, 2) i;
INSERT INTO dns_services (id, name, zone_id, subdomain, name_template, record_types, min_ttl, max_ttl, default_ttl, writer_orgs)
SELECT 'svc-' || i, 'svc-' || i, 'z-' || i % 3, 'svc-' || i, '{instance}', '["CNAME", "A", "AAAA"]', 5, 86400, 300, '["org-big"]'
FROM generate_series(0, 29) i;
INSERT INTO dns_records (id, service_id, zone_id, org_id, instance, name, type, ttl, targets, cluster_id, conditions, phase, published,
	published_generation, next_pass_at, created_at)
SELECT 'rec-' || i, 'svc-' || k, 'z-' || k % 3, CASE WHEN i < $1 / 10 THEN 'org-big' ELSE 'org-' || i % 300 END, 'i' || i,
	'i' || i || '.svc-' || k || '.zone-' || k % 3 || '.example', 'CNAME', 300,
	CASE WHEN i < $1 / 10 AND i % 1000 = 0 THEN '[]'::jsonb ELSE '["lb.example.net"]'::jsonb END,
	CASE WHEN i < $1 / 10 AND i % 1000 = 0 THEN 'cl-big' ELSE '' END, $2::jsonb, 'ready',
	'{"name": "x", "type": "CNAME", "ttl": 300, "values": ["lb.example.net"]}', 1,
	CASE WHEN i % 100 = 0 THEN now() - interval '1 minute' END, timestamptz '2026-01-01' + i * interval '1 second'
FROM generate_series(0, $1 - 1) i, LATERAL (SELECT CASE WHEN i < $1 / 10 THEN 0 ELSE i % 30 END AS k) svc`

// dnsSeedConditions are a published, resolvable record's conditions.
var dnsSeedConditions = func() string {
	var conds []string
	for _, c := range []string{"Accepted", "Published", "Resolvable"} {
		conds = append(conds, `{"type": "`+c+`", "status": "True", "reason": "`+c+`", "message": "", "observed_generation": 1,
			"last_transition_time": "2026-01-01T00:00:00Z"}`)
	}
	return "[" + strings.Join(conds, ", ") + "]"
}()

// TestDNSReadsUseTheirIndexes explains every statement of the records' API
// reads and writes and of dns_mgr's claim and completion on a fleet of
// dnsPlanRecords records, and checks that none reads dns_records from end
// to end.
func TestDNSReadsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, cfg := pgtest.NewMigratedDatabase(t)
	seedPoolCluster(t, db, "org-big", "cl-big", "https://console-openshift-console.apps.big.example.net")
	pool, err := db.Gorm.DB()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	conn, err := pool.Conn(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer conn.Close()
	// The seed is one statement, longer than the pool's statement timeout,
	// whose rows are consistent: their foreign keys are not checked one by one.
	_, err = conn.ExecContext(ctx, "SET statement_timeout = 0; SET session_replication_role = replica")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	start := time.Now()
	for _, stmt := range strings.Split(seedDNSFleetSQL, ";\n") {
		var args []any
		if strings.Contains(stmt, "$1") {
			args = []any{dnsPlanRecords, dnsSeedConditions}
		}
		_, err := conn.ExecContext(ctx, stmt, args...)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "seeding: %s", stmt)
	}
	t.Logf("seeded %d DNS records in %s", dnsPlanRecords, time.Since(start))
	_, err = conn.ExecContext(ctx, "RESET statement_timeout; RESET session_replication_role")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(db.Gorm.Exec("ANALYZE").Error).To(gomega.Succeed())

	observed := pgtest.Open(t, cfg)
	var mu sync.Mutex
	var stmts []postgres.ObservedStatement
	g.Expect(observed.ObserveStatements(func(s postgres.ObservedStatement) {
		mu.Lock()
		stmts = append(stmts, s)
		mu.Unlock()
	})).To(gomega.Succeed())
	store := postgres.NewStore(observed, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	svc, err := store.FindDNSServiceByName(ctx, "svc-0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	small, err := store.FindDNSServiceByName(ctx, "svc-7")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	big := fleet.Identity{OrgID: "org-big"}
	ttl := 60

	calls := []struct {
		name string
		call func() error
	}{
		{"FindDNSServiceByName", func() error { _, err := store.FindDNSServiceByName(ctx, "svc-3"); return err }},
		{"ListDNSRecords(org-big)", func() error {
			_, _, err := store.ListDNSRecords(ctx, "org-big", svc, fleet.ListQuery{Page: 20, Size: 100})
			return err
		}},
		{"ListDNSRecords(org-7)", func() error { _, _, err := store.ListDNSRecords(ctx, "org-7", small, fleet.ListQuery{}); return err }},
		{"ListDNSRecords(org-big, search)", func() error {
			_, _, err := store.ListDNSRecords(ctx, "org-big", svc, fleet.ListQuery{Search: "instance = 'i42' or name = 'i7.svc-0.zone-0.example' or type = 'A' or phase = 'failed'"})
			return err
		}},
		{"ListDNSRecords(org-big, order)", func() error {
			_, _, err := store.ListDNSRecords(ctx, "org-big", svc, fleet.ListQuery{OrderBy: "instance desc", Size: 50})
			return err
		}},
		{"FindDNSRecord", func() error { _, err := store.FindDNSRecord(ctx, "org-big", svc, "rec-42"); return err }},
		{"CreateDNSRecord(same)", func() error {
			_, created, err := store.CreateDNSRecord(ctx, big, svc.Name, fleet.DNSRecordCreate{Instance: "i42", Targets: []string{"lb.example.net"}})
			if err == nil && created {
				return fmt.Errorf("created a record the fleet holds")
			}
			return err
		}},
		{"CreateDNSRecord(new)", func() error {
			_, _, err := store.CreateDNSRecord(ctx, big, svc.Name, fleet.DNSRecordCreate{Instance: "fresh", ClusterID: "cl-big"})
			return err
		}},
		{"UpdateDNSRecord", func() error {
			_, err := store.UpdateDNSRecord(ctx, fleet.Permitted, "org-big", svc.Name, "rec-43", nil, fleet.DNSRecordUpdate{TTL: &ttl})
			return err
		}},
		{"RequestDNSRecordDeletion", func() error {
			return store.RequestDNSRecordDeletion(ctx, fleet.Permitted, "org-big", svc.Name, "rec-44", nil)
		}},
		{"ClaimDNSZones+CompleteDNSZone", func() error {
			claims, err := store.ClaimDNSZones(ctx, "mgr", []string{"z-1"}, 3, 100, time.Minute)
			if err != nil {
				return err
			}
			if len(claims) != 3 || len(claims[0].Records) != 100 {
				return fmt.Errorf("claimed %d zones, the first with %d records; want 3 zones of 100", len(claims), len(claims[0].Records))
			}
			for _, c := range claims {
				var outcomes []fleet.DNSOutcome
				for _, w := range c.Records {
					outcomes = append(outcomes, fleet.DNSOutcome{ID: w.Record.ID, Generation: w.Record.Generation, Conditions: w.Record.Conditions,
						Publish: true, Published: w.Published, PublishedGeneration: w.Record.Generation, Synced: true})
				}
				if _, err := store.CompleteDNSZone(ctx, c, outcomes, nil); err != nil {
					return err
				}
			}
			return nil
		}},
		{"DeleteDNSService", func() error {
			if err := store.DeleteDNSService(ctx, small.ID, nil); fleet.ErrorCodeOf(err) != fleet.CodeConflict {
				return fmt.Errorf("DeleteDNSService(svc-7) = %v; want a conflict", err)
			}
			return nil
		}},
	}
	// The admin reads of services count their records from the counters:
	// they read no record at all.
	counted := map[string]bool{"ListDNSServices": true, "FindDNSService": true}
	for name, call := range map[string]func() error{
		"ListDNSServices": func() error { _, _, err := store.ListDNSServices(ctx, fleet.ListQuery{Size: 100}); return err },
		"FindDNSService":  func() error { _, err := store.FindDNSService(ctx, svc.ID); return err },
	} {
		calls = append(calls, struct {
			name string
			call func() error
		}{name, call})
	}
	wholeRecords := regexp.MustCompile(`Seq Scan on dns_records`)
	anyRecord := regexp.MustCompile(`on dns_records\b`)
	for _, c := range calls {
		mu.Lock()
		stmts = nil
		mu.Unlock()
		g.Expect(c.call()).To(gomega.Succeed(), c.name)
		mu.Lock()
		ran := stmts
		mu.Unlock()
		g.Expect(ran).NotTo(gomega.BeEmpty(), c.name)
		for _, s := range ran {
			plan := explainObserved(t, db, s)
			if wholeRecords.MatchString(plan) {
				t.Errorf("%s: a statement reads the whole of dns_records:\n%s\n%s", c.name, s.SQL, plan)
			}
			if counted[c.name] && anyRecord.MatchString(plan) {
				t.Errorf("%s: a statement reads dns_records to count them:\n%s\n%s", c.name, s.SQL, plan)
			}
		}
	}
}
