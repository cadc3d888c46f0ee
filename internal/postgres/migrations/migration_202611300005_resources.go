package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300005Resources creates the generic table of the hubs'
// objects of every kind but ManagedCluster (see fleet.ResourceKinds), and
// the bookkeeping of the agents' full resyncs per kind.
func migration202611300005Resources() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300005",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE resources (
	id               text PRIMARY KEY DEFAULT gen_random_uuid()::text,
	hub_id           text NOT NULL REFERENCES hubs (id),
	zone             text NOT NULL,
	api_group        text NOT NULL,
	version          text NOT NULL,
	kind             text NOT NULL,
	namespace        text NOT NULL DEFAULT '',
	name             text NOT NULL,
	cluster_name     text NOT NULL DEFAULT '',
	uid              text NOT NULL DEFAULT '',
	resource_version text NOT NULL DEFAULT '',
	generation       bigint NOT NULL DEFAULT 0,
	labels           jsonb NOT NULL DEFAULT '{}',
	body             jsonb NOT NULL,
	content_hash     text NOT NULL,
	created_at       timestamptz NOT NULL DEFAULT now(),
	updated_at       timestamptz NOT NULL DEFAULT now(),
	deleted_at       timestamptz,
	UNIQUE (hub_id, api_group, kind, namespace, name)
);
CREATE INDEX resources_live ON resources (api_group, kind, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX resources_cluster ON resources (cluster_name, hub_id) WHERE cluster_name <> '' AND deleted_at IS NULL;
CREATE INDEX resources_labels ON resources USING gin (labels);
-- The keys one full resync of a kind reported so far, read by the
-- tombstoning at its end (as inventory_sync for ManagedClusters).
CREATE TABLE resource_sync (
	hub_id     text   NOT NULL,
	api_group  text   NOT NULL,
	kind       text   NOT NULL,
	generation bigint NOT NULL,
	namespace  text   NOT NULL,
	name       text   NOT NULL,
	PRIMARY KEY (hub_id, api_group, kind, generation, namespace, name)
);
-- The last full resync completed per hub and kind: a full batch of an
-- older or equal generation is a retry, stored without tombstoning.
CREATE TABLE resource_kind_syncs (
	hub_id               text   NOT NULL REFERENCES hubs (id),
	api_group            text   NOT NULL,
	kind                 text   NOT NULL,
	last_full_generation bigint NOT NULL,
	last_full_at         timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (hub_id, api_group, kind)
);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TABLE resource_kind_syncs;
DROP TABLE resource_sync;
DROP TABLE resources;
`).Error
		},
	}
}
