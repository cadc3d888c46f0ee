package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300001Hubs creates the hubs table: the RHACM hubs the fleet
// manager may place registrations on (ARCHITECTURE.md section 3).
func migration202611300001Hubs() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300001",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE hubs (
	id                     text PRIMARY KEY,
	created_at             timestamptz NOT NULL DEFAULT now(),
	updated_at             timestamptz NOT NULL DEFAULT now(),
	deleted_at             timestamptz,
	generation             bigint NOT NULL DEFAULT 1,
	name                   text NOT NULL,
	zone                   text NOT NULL,
	region                 text NOT NULL,
	cloud_provider         text NOT NULL DEFAULT '',
	delivery_mode          text NOT NULL,
	capacity               integer NOT NULL CHECK (capacity >= 0),
	agent_identity         text,
	owner_org_id           text,
	cordoned               boolean NOT NULL DEFAULT false,
	credentials            bytea,
	credentials_key_id     text,
	conditions             jsonb NOT NULL DEFAULT '[]',
	last_heartbeat_at      timestamptz,
	agent_version          text NOT NULL DEFAULT '',
	agent_start_generation bigint NOT NULL DEFAULT 0,
	revision               bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX hubs_name_live ON hubs (name) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX hubs_agent_identity_live ON hubs (agent_identity) WHERE deleted_at IS NULL AND agent_identity IS NOT NULL;
CREATE INDEX hubs_zone_live ON hubs (zone) WHERE deleted_at IS NULL;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP TABLE hubs`).Error
		},
	}
}
