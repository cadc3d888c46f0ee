package main

import (
	"context"
	"fmt"
	"strings"
)

// The floor is what PostgreSQL alone needs for the rows a full sync writes:
// one statement generating them all inside the server, into a scratch table
// with managed_clusters' columns, defaults and indexes (not its foreign keys).
// The narrow floor fills two jsonb columns (labels and claims), as the
// project's test-infrastructure notes measure it; the wide one also fills
// capacity, allocatable and conditions the way the simulated agents do, so
// its rows are as large as the ingested ones.

// floorColumns are the columns the floor statements write.
const floorColumns = `hub_id, name, uid, resource_version, cluster_id, labels, claims, capacity, allocatable, conditions,
	kubernetes_version, openshift_version, platform, product, region, console_url, joined, available, content_hash`

// floorSelect generates the rows: %[1]d clusters per hub, %[2]d rows in all;
// %[3]s is the capacity, allocatable and conditions expressions.
const floorSelect = `
SELECT h.id, c.name, md5(c.name)::uuid::text, '123456', md5('id' || c.name)::uuid::text,
	jsonb_build_object('cloud', 'Amazon', 'vendor', 'OpenShift', 'name', c.name,
		'cluster.open-cluster-management.io/clusterset', 'default', 'openshiftVersion', '4.16.12'),
	jsonb_build_object('id.openshift.io', md5('id' || c.name)::uuid::text, 'version.openshift.io', '4.16.12',
		'platform.open-cluster-management.io', 'AWS', 'product.open-cluster-management.io', 'OpenShift',
		'region.open-cluster-management.io', 'us-east-1',
		'consoleurl.cluster.open-cluster-management.io', 'https://console-openshift-console.apps.' || c.name || '.bench.example.com',
		'kubeversion.open-cluster-management.io', 'v1.29.8+f10c92d', 'name', c.name),
	%[3]s,
	'v1.29.8+f10c92d', '4.16.12', 'AWS', 'OpenShift', 'us-east-1',
	'https://console-openshift-console.apps.' || c.name || '.bench.example.com', 'True', 'True', md5(c.name || '4.16.12')
FROM generate_series(0, %[2]d - 1) AS g,
	LATERAL (SELECT md5('hub' || (g / %[1]d))::uuid::text AS id) AS h,
	LATERAL (SELECT 'cluster-' || lpad((g / %[1]d)::text, 3, '0') || '-' || lpad((g %% %[1]d)::text, 5, '0') AS name) AS c`

// narrowExtras leaves capacity, allocatable and conditions at their defaults.
const narrowExtras = `'{}'::jsonb, '{}'::jsonb, '[]'::jsonb`

// wideExtras fills them as the simulated agents report them.
const wideExtras = `jsonb_build_object('cpu', '24', 'memory', '98765432Ki', 'pods', '750', 'core_worker', '24', 'socket_worker', '3'),
	jsonb_build_object('cpu', '23500m', 'memory', '95432100Ki', 'pods', '750', 'core_worker', '24', 'socket_worker', '3'),
	jsonb_build_array(
		jsonb_build_object('type', 'HubAcceptedManagedCluster', 'status', 'True', 'reason', 'HubClusterAdminAccepted',
			'message', 'Accepted by hub cluster admin', 'last_transition_time', '2026-01-10T08:00:00Z'),
		jsonb_build_object('type', 'ManagedClusterJoined', 'status', 'True', 'reason', 'ManagedClusterJoined',
			'message', 'Managed cluster joined', 'last_transition_time', '2026-01-10T08:01:00Z'),
		jsonb_build_object('type', 'ManagedClusterConditionAvailable', 'status', 'True', 'reason', 'ManagedClusterAvailable',
			'message', 'Managed cluster is available', 'last_transition_time', '2026-01-10T08:02:00Z'))`

// floorUpsertSet rewrites every column of a conflicting row.
const floorUpsertSet = `
ON CONFLICT (hub_id, name) DO UPDATE SET uid = excluded.uid, resource_version = excluded.resource_version,
	cluster_id = excluded.cluster_id, labels = excluded.labels, claims = excluded.claims, capacity = excluded.capacity,
	allocatable = excluded.allocatable, conditions = excluded.conditions, kubernetes_version = excluded.kubernetes_version,
	openshift_version = excluded.openshift_version, platform = excluded.platform, product = excluded.product,
	region = excluded.region, console_url = excluded.console_url, joined = excluded.joined, available = excluded.available,
	content_hash = excluded.content_hash, updated_at = now(), deleted_at = NULL`

// floorStatements returns the scratch table's DDL and the insert and upsert
// statements of the narrow or wide floor.
func floorStatements(table string, perHub, total int, wide bool) (create, insert, upsert string) {
	extras := narrowExtras
	if wide {
		extras = wideExtras
	}
	create = fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s;
CREATE TABLE %[1]s (LIKE managed_clusters INCLUDING DEFAULTS INCLUDING INDEXES)`, table)
	insert = fmt.Sprintf("INSERT INTO %s (%s)", table, floorColumns) + fmt.Sprintf(floorSelect, perHub, total, extras)
	return create, insert, insert + floorUpsertSet
}

// runFloor times one floor: the insert, then the upsert of the same rows. It
// leaves the table in place for rowSize and dropFloor.
func runFloor(ctx context.Context, p *prober, name, table string, o options, wide bool) (insert, upsert phase, err error) {
	create, ins, ups := floorStatements(table, o.ClustersPerHub, o.totalClusters(), wide)
	if _, err := p.db.conn.Exec(ctx, create); err != nil {
		return insert, upsert, fmt.Errorf("runFloor(%s): %w", table, err)
	}
	exec := func(sql string) func(context.Context, *phase) error {
		return func(ctx context.Context, ph *phase) error {
			tag, err := p.db.conn.Exec(ctx, sql)
			ph.Rows, ph.Requests = int(tag.RowsAffected()), 1
			return err
		}
	}
	if insert, err = p.measure(ctx, name+" insert", exec(ins)); err != nil {
		return insert, upsert, fmt.Errorf("runFloor(%s): insert: %w", table, err)
	}
	if upsert, err = p.measure(ctx, name+" upsert", exec(ups)); err != nil {
		return insert, upsert, fmt.Errorf("runFloor(%s): upsert: %w", table, err)
	}
	return insert, upsert, nil
}

// rowSize returns the average stored size of a row of table, in bytes.
func rowSize(ctx context.Context, db *benchDB, table string) (float64, error) {
	var size float64
	err := db.conn.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(avg(pg_column_size(t.*)), 0) FROM %s t`, table)).Scan(&size)
	return size, err
}

// dropTables removes the scratch tables, so that their dead rows cost the
// measured scenarios nothing.
func dropTables(ctx context.Context, db *benchDB, tables ...string) error {
	_, err := db.conn.Exec(ctx, "DROP TABLE IF EXISTS "+strings.Join(tables, ", "))
	return err
}
