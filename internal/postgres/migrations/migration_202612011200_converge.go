package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612011200Converge brings every database to the schema a fresh
// one gets. Three applied migrations were once edited in place, so a database
// migrated before an edit kept the older definition:
//
//   - 202611300003 created inventory_sync UNLOGGED until it became a logged
//     table: an unlogged one is emptied by a crash or lost in a fail-over,
//     and a full resync cut by either tombstones what it had not seen yet;
//   - 202611300007 created managed_clusters_region with INCLUDE (hub_id);
//   - 202611300009 created policy_compliance_sync accepting compliance from
//     any hub, not only from the hubs the policy is placed on.
//
// Each step is a no-op on a database that already has today's definition.
// Applied migrations are never edited again: a change is a new migration.
func migration202612011200Converge() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612011200",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
DO $$
BEGIN
	IF (SELECT relpersistence FROM pg_class WHERE oid = 'inventory_sync'::regclass) <> 'p' THEN
		ALTER TABLE inventory_sync SET LOGGED;
	END IF;
	IF (SELECT indnatts <> indnkeyatts FROM pg_index WHERE indexrelid = 'managed_clusters_region'::regclass) THEN
		DROP INDEX managed_clusters_region;
		CREATE INDEX managed_clusters_region ON managed_clusters (region, created_at, id) WHERE deleted_at IS NULL;
	END IF;
END $$;
-- As migration 202611300009 defines it today.
CREATE OR REPLACE FUNCTION policy_compliance_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	pid text := NEW.labels ->> 'fleet-manager.io/policy-id';
	statuses jsonb := NEW.body #> '{status,status}';
BEGIN
	IF pid IS NULL OR NEW.labels ->> 'policy.open-cluster-management.io/root-policy' IS NOT NULL
		OR NEW.labels ->> 'fleet-manager.io/hub-id' IS DISTINCT FROM NEW.hub_id
		OR NOT EXISTS (SELECT 1 FROM policy_hubs ph JOIN policies p ON p.id = ph.policy_id
			WHERE ph.policy_id = pid AND ph.hub_id = NEW.hub_id AND p.deleted_at IS NULL) THEN
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
END $$;
`).Error
		},
		// Nothing to undo: the migration only gives older databases the
		// definitions the earlier migrations give fresh ones.
		Rollback: func(*gorm.DB) error { return nil },
	}
}
