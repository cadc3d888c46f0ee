package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// seedRegistrationsSQL writes n registrations of org $1 (names prefixed by
// $2) by SQL, spread over three zones, five phases, two hubs (none when
// accepted), three envs and fifty teams; one in twenty is deleted, and its
// name reused by a live one.
const seedRegistrationsSQL = `
INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, labels, hub_id, deleted_at, created_at, conditions)
SELECT $1 || '-' || $2 || i, $1, 'u', $2 || lpad(i::text, 6, '0'), (ARRAY['eu', 'us', 'ap'])[1 + i % 3], 'OCP',
	(ARRAY['ready', 'ready', 'ready', 'provisioning', 'accepted', 'failed', 'ready'])[1 + i % 7],
	jsonb_build_object('env', (ARRAY['prod', 'dev', 'staging'])[1 + i % 3 / 2 + i % 2], 'team', 'team-' || i % 50),
	CASE WHEN i % 7 = 4 THEN NULL WHEN i % 2 = 0 THEN 'hub-a' ELSE 'hub-b' END,
	CASE WHEN i % 20 = 3 THEN now() END, timestamptz '2026-01-01' + i * interval '1 minute', $4::jsonb
FROM generate_series(1, $3) AS i;
INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, created_at)
SELECT $1 || '-' || $2 || i || '-again', $1, 'u', $2 || lpad(i::text, 6, '0'), 'eu', 'OCP', 'accepted', timestamptz '2026-01-01'
FROM generate_series(1, $3) AS i WHERE i % 20 = 3`

// seedConditions are conditions as large as a placed registration's, so
// that the rows are as wide as in production and PostgreSQL's choices are
// the same.
var seedConditions = func() string {
	var conds []string
	for _, c := range []string{"Accepted", "Placed", "Delivered", "Joined", "Available"} {
		conds = append(conds, `{"type": "`+c+`", "status": "True", "reason": "`+c+`", "message": "the registration is `+
			strings.ToLower(c)+` as the hub reported it at its last status", "observed_generation": 1,
			"last_transition_time": "2026-01-01T00:00:00Z"}`)
	}
	return "[" + strings.Join(conds, ", ") + "]"
}()

// seedRegistrations writes n registrations of org (seedRegistrationsSQL),
// after the two hubs they are placed on.
func seedRegistrations(t testing.TB, db *postgres.DB, org, prefix string, n int) {
	t.Helper()
	err := db.Gorm.Exec(`INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity)
		VALUES ('hub-a', 'hub-a', 'eu', 'eu-1', 'agent', 1000000), ('hub-b', 'hub-b', 'us', 'us-1', 'agent', 1000000)
		ON CONFLICT DO NOTHING`).Error
	if err != nil {
		t.Fatalf("inserting hubs: %v", err)
	}
	conn, err := db.Gorm.DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(seedRegistrationsSQL, ";") {
		args := []any{org, prefix, n}
		if strings.Contains(stmt, "$4") {
			args = append(args, seedConditions)
		}
		if _, err := conn.Exec(stmt, args...); err != nil {
			t.Fatalf("seeding registrations: %v", err)
		}
	}
}

// registrationSearches are searches of every kind the list's total reads
// differently, each with the SQL that selects the same rows of
// registrations r and their hubs h.
var registrationSearches = []struct{ search, sql string }{
	{"", "true"},
	{"phase = 'ready'", "r.phase = 'ready'"},
	{"phase in ('accepted', 'failed')", "r.phase IN ('accepted', 'failed')"},
	{"zone = 'us'", "r.zone = 'us'"},
	{"phase = 'ready' and zone != 'eu'", "r.phase = 'ready' AND r.zone <> 'eu'"},
	{"not phase = 'ready' or zone = 'ap'", "NOT r.phase = 'ready' OR r.zone = 'ap'"},
	{"phase like 'pro%'", "r.phase LIKE 'pro%'"},
	{"name = 'c-000042'", "r.name = 'c-000042'"},
	{"name = 'c-000003'", "r.name = 'c-000003'"},
	{"name like 'c-0001%'", "r.name LIKE 'c-0001%'"},
	{"labels.env = 'prod'", "r.labels ->> 'env' = 'prod'"},
	{"labels.team = 'team-7'", "r.labels ->> 'team' = 'team-7'"},
	{"labels.team = 'team-70'", "r.labels ->> 'team' = 'team-70'"},
	{"labels.team = 'team-7' and phase = 'ready'", "r.labels ->> 'team' = 'team-7' AND r.phase = 'ready'"},
	{"labels.env != 'prod'", "r.labels ->> 'env' <> 'prod'"},
	{"hub_id = 'hub-a'", "r.hub_id = 'hub-a'"},
	{"hub_id is null", "r.hub_id IS NULL"},
	{"hub_name = 'hub-b' and zone = 'us'", "h.name = 'hub-b' AND r.zone = 'us'"},
	{"hub_id = 'hub-b' or labels.team = 'team-3'", "r.hub_id = 'hub-b' OR r.labels ->> 'team' = 'team-3'"},
}

// TestRegistrationListTotalIsTheCountOfItsRows checks the list's total, and
// a page, against a count of the rows it shows, for every kind of search and
// the zones a deployment serves: totals summed from the counters, counted
// from the rows, and the org's other rows, deleted ones and other orgs'
// left out.
func TestRegistrationListTotalIsTheCountOfItsRows(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	seedRegistrations(t, db, "org-1", "c-", 400)
	seedRegistrations(t, db, "org-2", "c-", 60)
	ctx := context.Background()
	// env's totals are summed from registration_label_counts, team's counted.
	if err := postgres.NewStore(db, nil, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault()).
		SyncCountedLabels(ctx, []string{"env"}); err != nil {
		t.Fatal(err)
	}
	for _, served := range [][]string{nil, {"eu"}, {"us", "ap"}} {
		cfg := postgres.DefaultStoreConfig()
		cfg.Zones = fleet.Zones{Served: served}
		store := postgres.NewStore(db, nil, fleet.SystemClock{}, cfg, authz.MustDefault())
		zones := "true"
		if served != nil {
			zones = "r.zone IN ('" + strings.Join(served, "', '") + "')"
		}
		for _, s := range registrationSearches {
			for _, order := range []struct{ orderBy, sql string }{
				{"", "r.created_at, r.id"}, {"created_at asc", "r.created_at, r.id"}, {"name desc", "r.name DESC, r.id"},
			} {
				call := fmt.Sprintf("ListRegistrations(org-1, %q, orderBy %q) serving %v", s.search, order.orderBy, served)
				rows := `FROM registrations r LEFT JOIN hubs h ON h.id = r.hub_id
					WHERE r.org_id = 'org-1' AND r.deleted_at IS NULL AND ` + zones + ` AND (` + s.sql + `)`
				want := countRows(t, db, "SELECT count(*) "+rows)
				var wantIDs []string
				if err := db.Gorm.Raw("SELECT r.id " + rows + " ORDER BY " + order.sql + " LIMIT 7 OFFSET 7").Scan(&wantIDs).Error; err != nil {
					t.Fatal(err)
				}
				regs, total, err := store.ListRegistrations(ctx, "org-1", fleet.ListQuery{Search: s.search, OrderBy: order.orderBy, Page: 2, Size: 7})
				if err != nil {
					t.Fatalf("%s: %v", call, err)
				}
				ids := []string{}
				for _, r := range regs {
					ids = append(ids, r.ID)
				}
				if total != want || strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
					t.Errorf("%s = total %d, page %v; want %d, %v", call, total, ids, want, wantIDs)
				}
			}
		}
	}
	if regs, total, err := postgres.NewStore(db, nil, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault()).
		ListRegistrations(ctx, "", fleet.ListQuery{}); err != nil || total != 0 || len(regs) != 0 {
		t.Errorf(`ListRegistrations("") = %d items, total %d, %v; want none`, len(regs), total, err)
	}
}

// TestRegistrationListReadsNoWholeTable explains every statement the list
// runs for the searches it serves by index, in the default order and by
// name, on the first page and a deep one, on a table large enough for
// PostgreSQL to choose, and checks that none reads registrations from end to
// end. A search on a value most rows hold of a label whose key is counted
// (env) is summed from registration_label_counts. A search by one label's
// value of any key is counted from registration_labels, and in the default
// order paged from it too; that page, and those of the whole list, a phase
// and a hub, read registrations only by id or from an index alone, also
// when the deployment serves some zones only (the zone is in the indexes).
func TestRegistrationListReadsNoWholeTable(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	seedRegistrations(t, db, "big", "c-", 40000)
	seedRegistrations(t, db, "small", "s-", 200)
	g.Expect(db.Gorm.Exec("VACUUM ANALYZE registrations").Error).To(gomega.Succeed())

	observed := pgtest.Open(t, cfg)
	var mu sync.Mutex
	var stmts []postgres.ObservedStatement
	g.Expect(observed.ObserveStatements(func(s postgres.ObservedStatement) {
		mu.Lock()
		stmts = append(stmts, s)
		mu.Unlock()
	})).To(gomega.Succeed())
	ctx := context.Background()
	g.Expect(postgres.NewStore(observed, nil, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault()).
		SyncCountedLabels(ctx, []string{"env"})).To(gomega.Succeed())
	// In the default order, these read registrations only by id, or from an
	// index alone, whether the deployment serves every zone or some.
	indexOnly := map[string]bool{"": true, "labels.team = 'team-7'": true, "phase = 'ready'": true, "phase = 'failed'": true, "hub_id = 'hub-a'": true}
	for _, served := range [][]string{nil, {"eu", "us"}} {
		cfg := postgres.DefaultStoreConfig()
		cfg.Zones = fleet.Zones{Served: served}
		store := postgres.NewStore(observed, nil, fleet.SystemClock{}, cfg, authz.MustDefault())
		for _, search := range []string{"", "labels.env = 'prod'", "name = 'c-012345'", "name like 'c-0123%'", "labels.team = 'team-7'", "phase = 'ready'",
			"phase = 'failed'", "hub_id = 'hub-a'", "phase = 'ready' and hub_id = 'hub-b'", "labels.team = 'team-7' and hub_id = 'hub-a'",
			"name like 'c-012%' and phase = 'accepted'"} {
			for _, orderBy := range []string{"", "name"} {
				for _, page := range []int{1, 150} {
					if search == "labels.env = 'prod'" && page > 1 && orderBy != "" {
						// A deep page of a value most rows hold, in the order of
						// names, reads the rows before it, a third of this
						// table: a scan is the planner's right choice here, and
						// the cost is the page's depth, not the table's size.
						continue
					}
					call := fmt.Sprintf("ListRegistrations(big, %q, orderBy %q, page %d) serving %v", search, orderBy, page, served)
					stmts = nil
					_, _, err := store.ListRegistrations(ctx, "big", fleet.ListQuery{Search: search, OrderBy: orderBy, Page: page, Size: 100})
					g.Expect(err).NotTo(gomega.HaveOccurred(), call)
					g.Expect(stmts).To(gomega.HaveLen(2), call)
					checkListPlans(t, db, call, stmts, indexOnly[search] && orderBy == "")
				}
			}
		}
	}
}

// checkListPlans explains stmts, the statements of one call of the list, as
// the store runs them, and reports any that reads registrations from end to
// end, or, with indexOnly, any that reads them other than by id or from an
// index alone.
func checkListPlans(t *testing.T, db *postgres.DB, call string, stmts []postgres.ObservedStatement, indexOnly bool) {
	t.Helper()
	for _, s := range stmts {
		sql := db.Gorm.Dialector.Explain(s.SQL, s.Args...)
		plan := explainObserved(t, db, s)
		if strings.Contains(plan, "Seq Scan on registrations") {
			t.Errorf("%s: a statement reads the whole table:\n%s\n%s", call, sql, plan)
		}
		if !indexOnly {
			continue
		}
		for _, line := range strings.Split(plan, "\n") {
			if strings.Contains(line, " on registrations ") && !strings.Contains(line, "registrations_pkey") &&
				!strings.Contains(line, "Index Only Scan") {
				t.Errorf("%s: a statement reads registrations other than by id or from an index alone:\n%s\n%s", call, sql, plan)
			}
		}
	}
}

// explainObserved is the plan s runs with, its lines joined: planned with
// its values, or the generic plan of s prepared, as the store runs it.
func explainObserved(t *testing.T, db *postgres.DB, s postgres.ObservedStatement) string {
	t.Helper()
	if !s.Generic {
		return explain(t, db, db.Gorm.Dialector.Explain(s.SQL, s.Args...))
	}
	var lines []string
	err := db.Gorm.Connection(func(conn *gorm.DB) error {
		for _, sql := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE observed AS " + s.SQL} {
			if err := conn.Exec(sql).Error; err != nil {
				return err
			}
		}
		explain := "EXPLAIN " + postgres.ExecuteForTest("observed", len(s.Args))
		if err := conn.Raw(db.Gorm.Dialector.Explain(explain, s.Args...)).Scan(&lines).Error; err != nil {
			return err
		}
		return conn.Exec("DEALLOCATE observed; RESET plan_cache_mode").Error
	})
	if err != nil {
		t.Fatalf("EXPLAIN the generic plan of %s: %v", s.SQL, err)
	}
	return strings.Join(lines, "\n")
}

// explain is the plan of sql, its lines joined.
func explain(t *testing.T, db *postgres.DB, sql string) string {
	t.Helper()
	var lines []string
	if err := db.Gorm.Raw("EXPLAIN " + sql).Scan(&lines).Error; err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}
