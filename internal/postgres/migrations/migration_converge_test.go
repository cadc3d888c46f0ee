package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/migrations"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// convergeMigration is the migration that brings databases migrated before
// an applied migration was edited in place to the schema of a fresh one.
const convergeMigration = "202612011200"

// editedDefinitions are what applied migrations created before they were
// edited in place: a database migrated then holds them still. Each applies
// to a database migrated at or past its migration.
var editedDefinitions = []struct {
	migration, commit, sql string
}{
	{"202611300003", "c16fc6d", `ALTER TABLE inventory_sync SET UNLOGGED`},
	{"202611300007", "3ff039a", `DROP INDEX managed_clusters_region;
CREATE INDEX managed_clusters_region ON managed_clusters (region, created_at, id) INCLUDE (hub_id) WHERE deleted_at IS NULL`},
	{"202611300009", "c62bb61", `CREATE OR REPLACE FUNCTION policy_compliance_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	pid text := NEW.labels ->> 'fleet-manager.io/policy-id';
	statuses jsonb := NEW.body #> '{status,status}';
BEGIN
	IF pid IS NULL OR NEW.labels ->> 'policy.open-cluster-management.io/root-policy' IS NOT NULL
		OR NEW.labels ->> 'fleet-manager.io/hub-id' IS DISTINCT FROM NEW.hub_id
		OR NOT EXISTS (SELECT 1 FROM policies WHERE id = pid AND deleted_at IS NULL) THEN
		RETURN NULL;
	END IF;
	IF NEW.deleted_at IS NOT NULL OR jsonb_typeof(statuses) IS DISTINCT FROM 'array' THEN
		statuses := '[]';
	END IF;
	DELETE FROM policy_compliance c WHERE c.policy_id = pid AND c.hub_id = NEW.hub_id
		AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(statuses) e WHERE e ->> 'clustername' = c.cluster_name);
	INSERT INTO policy_compliance AS c (policy_id, hub_id, cluster_name, zone, state)
	SELECT DISTINCT ON (s.clustername) pid, NEW.hub_id, s.clustername, NEW.zone,
		CASE s.compliant WHEN 'Compliant' THEN 'Compliant' WHEN 'NonCompliant' THEN 'NonCompliant' ELSE 'Pending' END
	FROM jsonb_to_recordset(statuses) AS s(clustername text, compliant text)
	WHERE coalesce(s.clustername, '') <> ''
	ORDER BY s.clustername
	ON CONFLICT (policy_id, hub_id, cluster_name) DO UPDATE SET state = excluded.state, zone = excluded.zone, updated_at = now()
		WHERE c.state <> excluded.state OR c.zone <> excluded.zone;
	RETURN NULL;
END $$;`},
}

// TestMigrationsConvergeFromEveryStep migrates a database to each step before
// convergeMigration, gives it what the migrations up to that step created
// before they were edited, migrates it to the end, and compares its catalog
// with a fresh database's.
func TestMigrationsConvergeFromEveryStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh, _ := pgtest.NewMigratedDatabase(t)
	want := schemaOf(t, fresh)
	if !slices.Contains(want, "table inventory_sync persistence p") {
		t.Errorf("a fresh database's inventory_sync is not a logged table")
	}
	ids := migrations.IDs()
	last := slices.Index(ids, convergeMigration)
	if last < 0 {
		t.Fatalf("migration %s is not among %v", convergeMigration, ids)
	}
	for _, step := range ids[:last] {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			db := pgtest.Open(t, pgtest.NewDatabase(t))
			if err := db.MigrateTo(ctx, step); err != nil {
				t.Fatalf("MigrateTo(%s) = %v", step, err)
			}
			for _, d := range editedDefinitions {
				if d.migration <= step {
					if err := db.Gorm.Exec(d.sql).Error; err != nil {
						t.Fatalf("migration %s as before %s: %v", d.migration, d.commit, err)
					}
				}
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("Migrate() from %s = %v", step, err)
			}
			got := schemaOf(t, db)
			for _, line := range got {
				if !slices.Contains(want, line) {
					t.Errorf("migrated from %s, not in a fresh database: %s", step, line)
				}
			}
			for _, line := range want {
				if !slices.Contains(got, line) {
					t.Errorf("migrated from %s, missing from it: %s", step, line)
				}
			}
		})
	}
}

// schemaOf describes the public schema from the catalog, one sorted line per
// relation (with its persistence), column, index, constraint, trigger,
// function and view.
func schemaOf(t *testing.T, db *postgres.DB) []string {
	t.Helper()
	var lines []string
	for what, query := range map[string]string{
		"relations": `SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence'
	WHEN 'v' THEN 'view' WHEN 'm' THEN 'view' ELSE c.relkind::text END || ' ' || c.relname || ' persistence ' || c.relpersistence::text
FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'i', 'S', 'v', 'm')`,
		"columns": `SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
	|| CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
	|| CASE WHEN a.attgenerated <> '' THEN ' generated' ELSE '' END
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped`,
		"indexes": `SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relnamespace = 'public'::regnamespace`,
		"constraints": `SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace`,
		"triggers": `SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal`,
		"functions": `SELECT 'function ' || pg_get_functiondef(p.oid) FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.prokind IN ('f', 'p')`,
		"views": `SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid) FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('v', 'm')`,
	} {
		var got []string
		if err := db.Gorm.Raw(query).Scan(&got).Error; err != nil {
			t.Fatalf("reading the %s of the schema: %v", what, err)
		}
		if len(got) == 0 {
			t.Fatalf("the schema has no %s", what)
		}
		lines = append(lines, got...)
	}
	slices.Sort(lines)
	return lines
}
