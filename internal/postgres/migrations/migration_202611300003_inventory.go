package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300003Inventory creates the managed-cluster inventory the
// hub agents report, and the columns of the agent protocol: resync requests,
// agent-reported registration conditions and import material.
func migration202611300003Inventory() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300003",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE hubs
	ADD COLUMN resync_requested     boolean NOT NULL DEFAULT true,
	ADD COLUMN last_full_generation bigint  NOT NULL DEFAULT -1,
	ADD COLUMN last_inventory_at    timestamptz,
	ADD COLUMN inventory_stale      boolean NOT NULL DEFAULT false,
	ADD COLUMN agent_capacity       jsonb   NOT NULL DEFAULT '{}';
ALTER TABLE registrations
	ADD COLUMN hub_conditions         jsonb NOT NULL DEFAULT '[]',
	ADD COLUMN import_material        bytea,
	ADD COLUMN import_material_key_id text;
CREATE TABLE managed_clusters (
	id                 text PRIMARY KEY DEFAULT gen_random_uuid()::text,
	hub_id             text NOT NULL REFERENCES hubs (id),
	name               text NOT NULL,
	uid                text NOT NULL DEFAULT '',
	resource_version   text NOT NULL DEFAULT '',
	registration_id    text REFERENCES registrations (id),
	cluster_id         text NOT NULL DEFAULT '',
	labels             jsonb NOT NULL DEFAULT '{}',
	claims             jsonb NOT NULL DEFAULT '{}',
	capacity           jsonb NOT NULL DEFAULT '{}',
	allocatable        jsonb NOT NULL DEFAULT '{}',
	conditions         jsonb NOT NULL DEFAULT '[]',
	kubernetes_version text NOT NULL DEFAULT '',
	openshift_version  text NOT NULL DEFAULT '',
	platform           text NOT NULL DEFAULT '',
	product            text NOT NULL DEFAULT '',
	region             text NOT NULL DEFAULT '',
	console_url        text NOT NULL DEFAULT '',
	joined             text NOT NULL DEFAULT 'Unknown',
	available          text NOT NULL DEFAULT 'Unknown',
	content_hash       text NOT NULL,
	created_at         timestamptz NOT NULL DEFAULT now(),
	updated_at         timestamptz NOT NULL DEFAULT now(),
	deleted_at         timestamptz,
	UNIQUE (hub_id, name)
);
CREATE INDEX managed_clusters_live ON managed_clusters (hub_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX managed_clusters_registration ON managed_clusters (registration_id) WHERE registration_id IS NOT NULL;
CREATE INDEX managed_clusters_labels ON managed_clusters USING gin (labels);
-- The names one full resync reported so far; only the tombstoning at its end
-- reads them. Logged, like every table: after a crash or a fail-over the
-- resync's last batch must still see what its first batches reported.
CREATE TABLE inventory_sync (
	hub_id     text   NOT NULL,
	generation bigint NOT NULL,
	name       text   NOT NULL,
	PRIMARY KEY (hub_id, generation, name)
);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TABLE inventory_sync;
DROP TABLE managed_clusters;
ALTER TABLE registrations DROP COLUMN import_material_key_id, DROP COLUMN import_material, DROP COLUMN hub_conditions;
ALTER TABLE hubs DROP COLUMN agent_capacity, DROP COLUMN inventory_stale, DROP COLUMN last_inventory_at,
	DROP COLUMN last_full_generation, DROP COLUMN resync_requested;
`).Error
		},
	}
}
