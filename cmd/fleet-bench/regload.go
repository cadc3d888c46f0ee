package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// initialRegistrations is the size of the registrations table the first
// create scenarios run at.
const initialRegistrations = 100

// loadedName is the name of the i-th registration loaded by SQL.
func loadedName(i int) string { return fmt.Sprintf("loaded-%07d", i) }

// loadRegistrationsSQL writes registrations $2 to $3 of organisation $1 in
// one statement, settled as the reconcilers and the agents leave them:
// placed on the hubs in turn, published at the hub's current revision and
// acknowledged (Delivered), Joined and Available as the agent reports them,
// so phase ready; labels env (prod 50%, staging 30%, dev 20%), team (one of
// 20) and cloud; a region of benchRegions; creation times a second apart; and
// the next recheck spread over the reconcilers' recheck interval (an hour),
// as the rechecks of a settled fleet are. The statement-level triggers keep
// registration_counts; the hubs' placed_count is set by placedSQL after.
const loadRegistrationsSQL = `
WITH h AS (SELECT id, revision, delivery_mode, row_number() OVER (ORDER BY name) - 1 AS n, count(*) OVER () AS hubs
	FROM hubs WHERE deleted_at IS NULL AND zone = '` + benchZone + `'),
g AS (SELECT s AS i, (ARRAY[%s])[1 + s %% %d] AS region,
	(ARRAY['prod','prod','prod','prod','prod','staging','staging','staging','dev','dev'])[1 + (s * 7) %% 10] AS env
	FROM generate_series($2::int, $3::int - 1) AS s),
c AS (SELECT '2026-11-01T00:00:00Z'::timestamptz AS t)
INSERT INTO registrations (id, created_at, updated_at, org_id, owner, name, labels, zone, region, product, hub_id,
	conditions, hub_conditions, phase, generation, observed_generation, published_revision, published_generation,
	delivered_via, next_attempt_at)
SELECT gen_random_uuid()::text, now() - make_interval(secs => ($3::int - g.i)::float8), now(), $1, 'bench-loader',
	'loaded-' || lpad(g.i::text, 7, '0'),
	jsonb_build_object('env', g.env, 'team', 'team-' || (g.i %% 20), 'cloud', (ARRAY['Amazon','Google','Azure'])[1 + g.i %% 3]),
	'` + benchZone + `', g.region, 'OCP', h.id,
	jsonb_build_array(
		jsonb_build_object('type', 'Accepted', 'status', 'True', 'reason', 'Validated', 'message', 'the registration passed validation, quota and access checks', 'observed_generation', 1, 'last_transition_time', c.t),
		jsonb_build_object('type', 'Placed', 'status', 'True', 'reason', 'HubSelected', 'message', 'placed on hub ' || h.id, 'observed_generation', 1, 'last_transition_time', c.t),
		jsonb_build_object('type', 'Delivered', 'status', 'True', 'reason', 'AcknowledgedByAgent', 'message', 'the agent applied the revision', 'observed_generation', 1, 'last_transition_time', c.t),
		jsonb_build_object('type', 'Joined', 'status', 'Unknown', 'reason', 'AwaitingAgentReport', 'message', 'the hub has not reported this cluster yet', 'observed_generation', 1, 'last_transition_time', c.t),
		jsonb_build_object('type', 'Available', 'status', 'Unknown', 'reason', 'AwaitingAgentReport', 'message', 'the hub has not reported this cluster yet', 'observed_generation', 1, 'last_transition_time', c.t)),
	jsonb_build_array(
		jsonb_build_object('type', 'Joined', 'status', 'True', 'reason', 'ManagedClusterJoined', 'message', 'Managed cluster joined', 'observed_generation', 1, 'last_transition_time', c.t),
		jsonb_build_object('type', 'Available', 'status', 'True', 'reason', 'ManagedClusterAvailable', 'message', 'Managed cluster is available', 'observed_generation', 1, 'last_transition_time', c.t)),
	'ready', 1, 1, h.revision, 1, h.delivery_mode, now() + random() * interval '1 hour'
FROM g JOIN h ON h.n = g.i %% h.hubs CROSS JOIN c`

// loadRegistrations loads registrations [from, to) of org by SQL, counts
// what each hub holds into its placed_count (placedSQL), then vacuums and
// analyzes, as autovacuum would have done in a deployment.
func loadRegistrations(ctx context.Context, db *benchDB, org string, from, to int, out io.Writer) error {
	quoted := ""
	for i, r := range benchRegions {
		if i > 0 {
			quoted += ","
		}
		quoted += "'" + r + "'"
	}
	start := time.Now()
	tag, err := db.conn.Exec(ctx, fmt.Sprintf(loadRegistrationsSQL, quoted, len(benchRegions)), org, from, to)
	if err != nil {
		return fmt.Errorf("loading registrations: %w", err)
	}
	if int(tag.RowsAffected()) != to-from {
		return fmt.Errorf("loading registrations: wrote %d rows, want %d (are the hubs there?)", tag.RowsAffected(), to-from)
	}
	if _, err := db.conn.Exec(ctx, placedSQL); err != nil {
		return fmt.Errorf("counting the placed registrations: %w", err)
	}
	fmt.Fprintf(out, "loaded %d registrations of %s by SQL in %s\n", to-from, org, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := db.conn.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return fmt.Errorf("VACUUM (ANALYZE): %w", err)
	}
	fmt.Fprintf(out, "VACUUM (ANALYZE) in %s\n", time.Since(start).Round(time.Millisecond))
	return db.checkpoint(ctx)
}

// countRegistrations counts the live registrations.
func countRegistrations(ctx context.Context, db *benchDB) (int, error) {
	var n int
	err := db.conn.QueryRow(ctx, `SELECT count(*) FROM registrations WHERE deleted_at IS NULL`).Scan(&n)
	return n, err
}

// sampleRegistrations picks n live registrations of org at random, with the
// hub each is placed on.
func sampleRegistrations(ctx context.Context, db *benchDB, org string, n int) (ids, hubs []string, err error) {
	rows, err := db.conn.Query(ctx, `SELECT id, hub_id FROM registrations
		WHERE org_id = $1 AND deleted_at IS NULL AND hub_id IS NOT NULL ORDER BY random() LIMIT $2`, org, n)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, hub string
		if err := rows.Scan(&id, &hub); err != nil {
			return nil, nil, err
		}
		ids, hubs = append(ids, id), append(hubs, hub)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return nil, nil, fmt.Errorf("sampleRegistrations: %s has no placed registration", org)
	}
	return ids, hubs, nil
}
