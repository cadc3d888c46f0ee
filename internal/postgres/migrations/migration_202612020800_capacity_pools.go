package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020800CapacityPools creates blueprints and their immutable
// versions, capacity pools, the pools' clusters (each a registration the
// pool made, ADR 0018), reservations and the scaler's events. A cluster's
// reserved units are a column the reservations' writes move under the
// cluster row's lock, and a CHECK holds them within its capacity, so no
// interleaving of bookings can overbook a cluster.
func migration202612020800CapacityPools() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020800",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE blueprints (
	id             text PRIMARY KEY,
	org_id         text NOT NULL,
	name           text NOT NULL,
	latest_version integer NOT NULL DEFAULT 1,
	created_by     text NOT NULL DEFAULT '',
	created_at     timestamptz NOT NULL DEFAULT now(),
	updated_at     timestamptz NOT NULL DEFAULT now(),
	deleted_at     timestamptz
);
CREATE UNIQUE INDEX blueprints_org_name ON blueprints (org_id, name) WHERE deleted_at IS NULL;
CREATE INDEX blueprints_live ON blueprints (org_id, created_at, id) WHERE deleted_at IS NULL;
CREATE TABLE blueprint_versions (
	blueprint_id text NOT NULL REFERENCES blueprints (id),
	version      integer NOT NULL CHECK (version >= 1),
	spec         jsonb NOT NULL,
	created_by   text NOT NULL DEFAULT '',
	created_at   timestamptz NOT NULL DEFAULT now(),
	deleted_at   timestamptz,
	PRIMARY KEY (blueprint_id, version)
);
CREATE TABLE capacity_pools (
	id                    text PRIMARY KEY,
	org_id                text NOT NULL,
	name                  text NOT NULL,
	zone                  text NOT NULL,
	cloud                 text NOT NULL,
	region                text NOT NULL,
	blueprint_id          text NOT NULL,
	blueprint_version     integer NOT NULL,
	min_clusters          integer NOT NULL CHECK (min_clusters >= 0),
	max_clusters          integer NOT NULL CHECK (max_clusters >= min_clusters AND max_clusters >= 1),
	units_per_cluster     integer NOT NULL CHECK (units_per_cluster >= 1),
	scale_up_percent      integer NOT NULL DEFAULT 0,
	add_cluster_percent   integer NOT NULL DEFAULT 0,
	credentials           bytea,
	credentials_key_id    text,
	generation            bigint NOT NULL DEFAULT 1,
	created_by            text NOT NULL DEFAULT '',
	created_at            timestamptz NOT NULL DEFAULT now(),
	updated_at            timestamptz NOT NULL DEFAULT now(),
	deletion_requested_at timestamptz,
	deleted_at            timestamptz,
	-- When a reservation last found no room (the scaler adds a cluster).
	exhausted_at          timestamptz,
	-- The pool reconciler's queue: due time, lease and backoff.
	next_pass_at          timestamptz NOT NULL DEFAULT now(),
	claimed_by            text,
	claimed_until         timestamptz,
	attempts              integer NOT NULL DEFAULT 0,
	last_error            text NOT NULL DEFAULT '',
	FOREIGN KEY (blueprint_id, blueprint_version) REFERENCES blueprint_versions (blueprint_id, version)
);
CREATE UNIQUE INDEX capacity_pools_org_name ON capacity_pools (org_id, name) WHERE deleted_at IS NULL;
CREATE INDEX capacity_pools_live ON capacity_pools (org_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX capacity_pools_due ON capacity_pools (next_pass_at) WHERE deleted_at IS NULL;
CREATE INDEX capacity_pools_blueprint ON capacity_pools (blueprint_id, blueprint_version) WHERE deleted_at IS NULL;
CREATE TABLE pool_clusters (
	registration_id   text PRIMARY KEY REFERENCES registrations (id),
	pool_id           text NOT NULL REFERENCES capacity_pools (id),
	org_id            text NOT NULL,
	-- The cluster's hub-side name, what its Hive objects are named by.
	cluster_name      text NOT NULL,
	blueprint_version integer NOT NULL,
	replicas          jsonb NOT NULL,
	capacity_units    integer NOT NULL,
	reserved_units    integer NOT NULL DEFAULT 0,
	add_ons_version   integer NOT NULL DEFAULT 0,
	scaled_at         timestamptz,
	empty_since       timestamptz DEFAULT now(),
	removing          boolean NOT NULL DEFAULT false,
	created_at        timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT pool_clusters_within_capacity CHECK (reserved_units >= 0 AND reserved_units <= capacity_units)
);
CREATE INDEX pool_clusters_pool ON pool_clusters (pool_id, created_at, registration_id);
CREATE TABLE reservations (
	id          text PRIMARY KEY,
	pool_id     text NOT NULL REFERENCES capacity_pools (id),
	cluster_id  text NOT NULL REFERENCES pool_clusters (registration_id),
	org_id      text NOT NULL,
	units       integer NOT NULL CHECK (units >= 1),
	instance_id text NOT NULL DEFAULT '',
	created_by  text NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reservations_pool ON reservations (pool_id, created_at, id);
CREATE INDEX reservations_cluster ON reservations (cluster_id);
CREATE TABLE pool_events (
	id         bigserial PRIMARY KEY,
	pool_id    text NOT NULL REFERENCES capacity_pools (id),
	cluster_id text NOT NULL DEFAULT '',
	type       text NOT NULL,
	reason     text NOT NULL,
	message    text NOT NULL DEFAULT '',
	at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pool_events_pool ON pool_events (pool_id, id);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP TABLE pool_events, reservations, pool_clusters, capacity_pools, blueprint_versions, blueprints`).Error
		},
	}
}
