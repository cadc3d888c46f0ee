package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// benchRegions are the regions the loaded clusters are spread over, evenly.
var benchRegions = []string{"us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2",
	"eu-central-1", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "ca-central-1", "sa-east-1"}

// loadInventorySQL writes clusters-per-hub rows for every hub in one
// statement, shaped as the agents report them: 5 labels (env prod 50%,
// staging 30%, dev 20%; team one of 20; cloud one of 3), 8 claims, capacity,
// allocatable, 3 conditions, a region of benchRegions and creation times a
// second apart. The change-feed trigger, where migrated, numbers the rows.
const loadInventorySQL = `
WITH h AS (SELECT id, row_number() OVER (ORDER BY name) AS n FROM hubs WHERE deleted_at IS NULL),
g AS (SELECT h.id AS hub_id, h.n, s AS i, (ARRAY[%s])[1 + (s + h.n) %% %d] AS region,
	(ARRAY['prod','prod','prod','prod','prod','staging','staging','staging','dev','dev'])[1 + (s * 7 + h.n) %% 10] AS env,
	'4.' || (14 + s %% 4) || '.' || (s %% 30) AS version
	FROM h CROSS JOIN generate_series(1, $1::int) AS s)
INSERT INTO managed_clusters (hub_id, name, uid, cluster_id, labels, claims, capacity, allocatable, conditions,
	kubernetes_version, openshift_version, platform, product, region, console_url, joined, available,
	content_hash, created_at, updated_at)
SELECT hub_id, 'cluster-' || n || '-' || i, gen_random_uuid()::text, gen_random_uuid()::text,
	jsonb_build_object('env', env, 'team', 'team-' || (i %% 20), 'cloud', (ARRAY['Amazon','Google','Azure'])[1 + i %% 3],
		'name', 'cluster-' || n || '-' || i, 'vendor', 'OpenShift'),
	jsonb_build_object('id.openshift.io', gen_random_uuid()::text, 'version.openshift.io', version,
		'platform.open-cluster-management.io', 'AWS', 'region.open-cluster-management.io', region,
		'product.open-cluster-management.io', 'OpenShift', 'consoleurl.cluster.open-cluster-management.io',
		'https://console.apps.cluster-' || n || '-' || i || '.example.com', 'kubeversion.open-cluster-management.io', 'v1.29.5',
		'name', 'cluster-' || n || '-' || i),
	'{"cpu":"24","memory":"96Gi","pods":"750","core_worker":"24","socket_worker":"3"}',
	'{"cpu":"23500m","memory":"94Gi","pods":"750","core_worker":"24","socket_worker":"3"}',
	'[{"type":"ManagedClusterJoined","status":"True","reason":"ManagedClusterJoined","message":"Managed cluster joined","last_transition_time":"2026-11-01T00:00:00Z"},
	  {"type":"ManagedClusterConditionAvailable","status":"True","reason":"ManagedClusterAvailable","message":"Managed cluster is available","last_transition_time":"2026-11-01T00:00:00Z"},
	  {"type":"HubAcceptedManagedCluster","status":"True","reason":"HubClusterAdminAccepted","message":"Accepted by hub cluster admin","last_transition_time":"2026-11-01T00:00:00Z"}]',
	'v1.29.5', version, 'AWS', 'OpenShift', region, 'https://console.apps.cluster-' || n || '-' || i || '.example.com',
	'True', 'True', md5(hub_id || i), now() - make_interval(secs => (n * $1::int + i)::float8), now()
FROM g`

// loadResourcesSQL writes $1 rows into the generic resources table, spread
// over the hubs and their clusters, four kinds in turn.
const loadResourcesSQL = `
WITH h AS (SELECT id, row_number() OVER (ORDER BY name) AS n, count(*) OVER () AS hubs FROM hubs WHERE deleted_at IS NULL),
k AS (SELECT * FROM (VALUES (0, 'policy.open-cluster-management.io', 'v1', 'Policy'),
	(1, 'addon.open-cluster-management.io', 'v1alpha1', 'ManagedClusterAddOn'),
	(2, 'cluster.open-cluster-management.io', 'v1beta2', 'ManagedClusterSetBinding'),
	(3, 'apps.open-cluster-management.io', 'v1', 'Subscription')) AS k (i, api_group, version, kind))
INSERT INTO resources (hub_id, zone, api_group, version, kind, namespace, name, cluster_name, uid, labels, body, content_hash)
SELECT h.id, 'bench', k.api_group, k.version, k.kind, c, 'resource-' || s, c, gen_random_uuid()::text,
	jsonb_build_object('app', 'app-' || (s % 50), 'env', (ARRAY['prod','staging','dev'])[1 + s % 3]),
	jsonb_build_object('spec', jsonb_build_object('remediationAction', 'inform', 'disabled', false),
		'status', jsonb_build_object('compliant', 'Compliant')),
	md5(s::text)
FROM generate_series(1, $1::int) AS s
JOIN h ON h.n = 1 + s % h.hubs
JOIN k ON k.i = s % 4
CROSS JOIN LATERAL (SELECT 'cluster-' || h.n || '-' || (1 + (s / h.hubs) % $2::int) AS c) AS cn`

// loadReadData fills the inventory and the resources table by SQL, gives
// benchOrg its share (shareWithOrg), then vacuums and analyzes, as autovacuum would have done in a deployment.
func loadReadData(ctx context.Context, o options, db *benchDB, out io.Writer) (resources int, share orgShare, err error) {
	quoted := ""
	for i, r := range benchRegions {
		if i > 0 {
			quoted += ","
		}
		quoted += "'" + r + "'"
	}
	start := time.Now()
	tag, err := db.conn.Exec(ctx, fmt.Sprintf(loadInventorySQL, quoted, len(benchRegions)), o.ClustersPerHub)
	if err != nil {
		return 0, share, fmt.Errorf("loading managed_clusters: %w", err)
	}
	fmt.Fprintf(out, "loaded %d managed clusters by SQL in %s\n", tag.RowsAffected(), time.Since(start).Round(time.Millisecond))
	if o.Resources > 0 {
		start = time.Now()
		if tag, err = db.conn.Exec(ctx, loadResourcesSQL, o.Resources, o.ClustersPerHub); err != nil {
			return 0, share, fmt.Errorf("loading resources: %w", err)
		}
		resources = int(tag.RowsAffected())
		fmt.Fprintf(out, "loaded %d resources by SQL in %s\n", resources, time.Since(start).Round(time.Millisecond))
	}
	if share, err = shareWithOrg(ctx, db, out); err != nil {
		return 0, share, err
	}
	start = time.Now()
	if _, err := db.conn.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return 0, share, fmt.Errorf("VACUUM (ANALYZE): %w", err)
	}
	fmt.Fprintf(out, "VACUUM (ANALYZE) in %s\n", time.Since(start).Round(time.Millisecond))
	return resources, share, db.checkpoint(ctx)
}

// readsDatabase is the database the reads run on: the one --reads-database
// names, or a new one.
func readsDatabase(ctx context.Context, o options) (*benchDB, error) {
	if o.ReadsDatabase != "" {
		return openDatabase(ctx, o.DB, o.ReadsDatabase)
	}
	return createDatabase(ctx, o.DB)
}

// loadedReadData reads back what loadReadData loaded into a kept database.
func loadedReadData(ctx context.Context, db *benchDB) (resources int, share orgShare, err error) {
	err = db.conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM resources WHERE deleted_at IS NULL),
		(SELECT count(*) FROM hubs WHERE owner_org_id = $1 AND deleted_at IS NULL),
		(SELECT count(*) FROM registrations WHERE org_id = $1)`, benchOrg).Scan(&resources, &share.hubs, &share.registrations)
	if err != nil {
		err = fmt.Errorf("reading the loaded data of %s: %w", db.name, err)
	}
	return resources, share, err
}
