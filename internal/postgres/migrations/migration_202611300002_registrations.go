package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300002Registrations creates the cluster registrations, their
// idempotency keys, and the hub columns placement and delivery need.
func migration202611300002Registrations() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300002",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
ALTER TABLE hubs
	ADD COLUMN placed_count     integer NOT NULL DEFAULT 0 CHECK (placed_count >= 0),
	ADD COLUMN applied_revision bigint  NOT NULL DEFAULT 0,
	ADD CONSTRAINT hubs_capacity_respected CHECK (placed_count <= capacity OR placed_count = 0);
CREATE TABLE registrations (
	id                    text PRIMARY KEY,
	created_at            timestamptz NOT NULL DEFAULT now(),
	updated_at            timestamptz NOT NULL DEFAULT now(),
	deletion_requested_at timestamptz,
	deleted_at            timestamptz,
	org_id                text NOT NULL,
	owner                 text NOT NULL,
	name                  text NOT NULL,
	display_name          text NOT NULL DEFAULT '',
	labels                jsonb NOT NULL DEFAULT '{}',
	zone                  text NOT NULL,
	region                text NOT NULL DEFAULT '',
	product               text NOT NULL,
	credentials           bytea,
	credentials_key_id    text,
	hub_id                text REFERENCES hubs (id),
	conditions            jsonb NOT NULL DEFAULT '[]',
	phase                 text NOT NULL,
	generation            bigint NOT NULL DEFAULT 1,
	observed_generation   bigint NOT NULL DEFAULT 0,
	published_revision    bigint,
	published_generation  bigint,
	withdrawn_revision    bigint,
	next_attempt_at       timestamptz,
	attempts              integer NOT NULL DEFAULT 0,
	claimed_by            text,
	claimed_until         timestamptz,
	last_error            text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX registrations_org_name_live ON registrations (org_id, name) WHERE deleted_at IS NULL;
CREATE INDEX registrations_org_created ON registrations (org_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX registrations_work ON registrations (next_attempt_at) WHERE deleted_at IS NULL AND next_attempt_at IS NOT NULL;
CREATE INDEX registrations_hub ON registrations (hub_id) WHERE deleted_at IS NULL;
CREATE INDEX registrations_unplaced ON registrations (zone) WHERE deleted_at IS NULL AND hub_id IS NULL;
CREATE INDEX registrations_labels ON registrations USING gin (labels);
CREATE TABLE idempotency_keys (
	org_id          text NOT NULL,
	key             text NOT NULL,
	request_hash    text NOT NULL,
	registration_id text NOT NULL REFERENCES registrations (id),
	created_at      timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TABLE idempotency_keys;
DROP TABLE registrations;
ALTER TABLE hubs DROP CONSTRAINT hubs_capacity_respected, DROP COLUMN applied_revision, DROP COLUMN placed_count;
`).Error
		},
	}
}
