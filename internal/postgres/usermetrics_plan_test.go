package postgres_test

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// seedMetricsFleetSQL is a fleet of many organisations on shared hubs, each
// registration with its cluster, its organisation's policies and their
// compliance, and its organisation's pool holding it; and hubs owned by
// organisations own-<n>, each with many clusters. org-big holds many more
// registrations than an average organisation, org-small a handful (the
// sizes are the SQL's own).
const seedMetricsFleetSQL = `
INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity, agent_identity, owner_org_id)
SELECT 'hub-' || i, 'hub-' || i, 'eu', 'eu-west-1', 'agent', 100000, 'agent-' || i, CASE WHEN i >= 30 THEN 'own-' || (i - 30) END
FROM generate_series(0, 39) i;
INSERT INTO registrations (id, org_id, owner, name, zone, product, hub_id, phase)
SELECT 'reg-' || i, CASE WHEN i < 300 THEN 'org-big' WHEN i < 303 THEN 'org-small' ELSE 'org-' || (i % 298) END,
	'u', 'r-' || i, 'eu', 'ocp', 'hub-' || (i % 30), (ARRAY['ready', 'provisioning', 'accepted'])[1 + i % 3]
FROM generate_series(0, 11999) i;
INSERT INTO managed_clusters (hub_id, name, uid, registration_id, cluster_id, content_hash)
SELECT r.hub_id, 'mc-' || r.id, 'uid-' || r.id, r.id, 'cid-' || r.id, 'h' FROM registrations r;
INSERT INTO managed_clusters (hub_id, name, uid, cluster_id, content_hash)
SELECT 'hub-' || (30 + i % 10), 'own-mc-' || i, 'uid-own-' || i, 'cid-own-' || i, 'h' FROM generate_series(0, 3999) i;
INSERT INTO policies (id, org_id, zone, name, body)
SELECT o.org_id || '-p' || j, o.org_id, 'eu', 'p' || j, '{}' FROM (SELECT DISTINCT org_id FROM registrations) o, generate_series(1, 3) j;
INSERT INTO policy_compliance (policy_id, hub_id, cluster_name, zone, state)
SELECT r.org_id || '-p' || j, r.hub_id, 'mc-' || r.id, 'eu', 'Compliant' FROM registrations r, generate_series(1, 3) j;
INSERT INTO blueprints (id, org_id, name) SELECT 'bp-' || o.org_id, o.org_id, 'bp' FROM (SELECT DISTINCT org_id FROM registrations) o;
INSERT INTO blueprint_versions (blueprint_id, version, spec) SELECT id, 1, '{}' FROM blueprints;
INSERT INTO capacity_pools (id, org_id, name, zone, cloud, region, blueprint_id, blueprint_version, min_clusters, max_clusters, units_per_cluster)
SELECT 'pool-' || org_id, org_id, 'pool', 'eu', 'aws', 'eu-west-1', id, 1, 0, 1000, 60 FROM blueprints;
INSERT INTO pool_clusters (registration_id, pool_id, org_id, cluster_name, blueprint_version, replicas, capacity_units)
SELECT r.id, 'pool-' || r.org_id, r.org_id, 'mc-' || r.id, 1, '{}', 60 FROM registrations r;
ANALYZE`

// TestMetricsReadsCostTheOrganisations explains every statement of an
// organisation's metrics reads on a fleet large enough for PostgreSQL to
// choose, and checks that none reads a table of the fleet from end to end
// (hubs aside: a few rows per hub), so that their cost is the
// organisation's: its hubs' clusters, its registrations', its policies'
// compliance, its counters and its pools.
func TestMetricsReadsCostTheOrganisations(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	g.Expect(db.Gorm.Exec(seedMetricsFleetSQL).Error).To(gomega.Succeed())

	observed := pgtest.Open(t, cfg)
	var mu sync.Mutex
	var stmts []postgres.ObservedStatement
	g.Expect(observed.ObserveStatements(func(s postgres.ObservedStatement) {
		mu.Lock()
		stmts = append(stmts, s)
		mu.Unlock()
	})).To(gomega.Succeed())
	for _, served := range [][]string{nil, {"eu", "us"}} {
		storeCfg := postgres.DefaultStoreConfig()
		storeCfg.Zones = fleet.Zones{Served: served}
		store := postgres.NewStore(observed, nil, fleet.SystemClock{}, storeCfg, authz.MustDefault())
		checkMetricsPlans(t, db, store, fmt.Sprint(served), &stmts)
	}
}

// checkMetricsPlans reads organisations' metrics through store, serving the
// zones served, whose statements land in stmts, and reports any that reads a table of the
// fleet other than hubs from end to end.
func checkMetricsPlans(t *testing.T, db *postgres.DB, store *postgres.Store, served string, stmts *[]postgres.ObservedStatement) {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	wholeTable := regexp.MustCompile(`Seq Scan on (\w+)`)
	for _, tc := range []struct {
		scope    fleet.MetricsScope
		clusters int
	}{
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-big"}, Limit: 5000, ClusterLabelSource: "cluster-id"}, 300},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-big"}, Limit: 5000, ClusterLabelSource: "name"}, 300},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-small"}, Limit: 5000, ClusterLabelSource: "cluster-id"}, 3},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "own-3"}, Limit: 5000, ClusterLabelSource: "name"}, 400},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "own-3"}, Limit: 5000, ClusterLabelSource: "cluster-id"}, 400},
		{fleet.MetricsScope{Caller: fleet.Identity{OrgID: "org-big"}, RegistrationID: "reg-7", Limit: 5000, ClusterLabelSource: "cluster-id"}, 1},
	} {
		call := fmt.Sprintf("MetricsInventory(%+v) serving %s", tc.scope, served)
		*stmts = nil
		inv, err := store.MetricsInventory(ctx, tc.scope)
		g.Expect(err).NotTo(gomega.HaveOccurred(), call)
		g.Expect(inv.Clusters).To(gomega.HaveLen(tc.clusters), call)
		g.Expect(*stmts).NotTo(gomega.BeEmpty(), call)
		for _, s := range *stmts {
			plan := explainObserved(t, db, s)
			for _, m := range wholeTable.FindAllStringSubmatch(plan, -1) {
				if m[1] != "hubs" {
					t.Errorf("%s: a statement reads the whole of %s:\n%s\n%s", call, m[1], s.SQL, plan)
				}
			}
		}
	}
}
