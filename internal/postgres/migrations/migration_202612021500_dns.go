package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612021500DNS creates DNS zones (their provider settings and
// sealed credentials, and dns_mgr's lease of each), services' naming
// policies within them, and service instances' records. A record's name is
// unique among live records, so two writers never hold one name; its
// published set is what the provider holds as last written, so a later
// change replaces exactly that. Records due for a pass are found per zone
// through a partial index that holds only the due ones.
func migration202612021500DNS() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021500",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE dns_zones (
	id                 text PRIMARY KEY,
	name               text NOT NULL,
	provider           text NOT NULL,
	-- The provider's settings (fleet.RFC2136Settings or Route53Settings
	-- under their provider's key); never a secret.
	settings           jsonb NOT NULL DEFAULT '{}',
	nameservers        jsonb NOT NULL DEFAULT '[]',
	credentials        bytea,
	credentials_key_id text,
	generation         bigint NOT NULL DEFAULT 1,
	created_by         text NOT NULL DEFAULT '',
	created_at         timestamptz NOT NULL DEFAULT now(),
	updated_at         timestamptz NOT NULL DEFAULT now(),
	deleted_at         timestamptz,
	-- dns_mgr's lease, and the zone's backoff after a provider outage
	-- (next_pass_at NULL: none).
	claimed_by         text,
	claimed_until      timestamptz,
	attempts           integer NOT NULL DEFAULT 0,
	last_error         text NOT NULL DEFAULT '',
	next_pass_at       timestamptz
);
CREATE UNIQUE INDEX dns_zones_name ON dns_zones (name) WHERE deleted_at IS NULL;
CREATE TABLE dns_services (
	id                      text PRIMARY KEY,
	name                    text NOT NULL,
	zone_id                 text NOT NULL REFERENCES dns_zones (id),
	subdomain               text NOT NULL,
	name_template           text NOT NULL,
	writer_orgs             jsonb NOT NULL DEFAULT '[]',
	writer_service_accounts jsonb NOT NULL DEFAULT '[]',
	record_types            jsonb NOT NULL,
	min_ttl                 integer NOT NULL,
	max_ttl                 integer NOT NULL,
	default_ttl             integer NOT NULL,
	generation              bigint NOT NULL DEFAULT 1,
	created_by              text NOT NULL DEFAULT '',
	created_at              timestamptz NOT NULL DEFAULT now(),
	updated_at              timestamptz NOT NULL DEFAULT now(),
	deleted_at              timestamptz,
	CHECK (min_ttl <= default_ttl AND default_ttl <= max_ttl)
);
CREATE UNIQUE INDEX dns_services_name ON dns_services (name) WHERE deleted_at IS NULL;
CREATE INDEX dns_services_zone ON dns_services (zone_id) WHERE deleted_at IS NULL;
CREATE TABLE dns_records (
	id                    text PRIMARY KEY,
	service_id            text NOT NULL REFERENCES dns_services (id),
	zone_id               text NOT NULL REFERENCES dns_zones (id),
	org_id                text NOT NULL,
	created_by            text NOT NULL DEFAULT '',
	instance              text NOT NULL,
	-- The record's FQDN, made by its service's policy.
	name                  text NOT NULL,
	type                  text NOT NULL,
	ttl                   integer NOT NULL,
	targets               jsonb NOT NULL DEFAULT '[]',
	-- The pool cluster whose ingress router the record follows ('' for none).
	cluster_id            text NOT NULL DEFAULT '',
	generation            bigint NOT NULL DEFAULT 1,
	conditions            jsonb NOT NULL DEFAULT '[]',
	-- Derived from the conditions (fleet.DNSRecordPhase), for search and order.
	phase                 text NOT NULL DEFAULT 'pending',
	-- What the provider holds as last published (a fleet.DNSRecordSet; NULL:
	-- nothing), the generation it was made from, and its change id while the
	-- change is not known to be synced.
	published             jsonb,
	published_generation  bigint NOT NULL DEFAULT 0,
	change_id             text NOT NULL DEFAULT '',
	-- dns_mgr's queue: due time (NULL: no pass due) and backoff.
	attempts              integer NOT NULL DEFAULT 0,
	last_error            text NOT NULL DEFAULT '',
	next_pass_at          timestamptz DEFAULT now(),
	created_at            timestamptz NOT NULL DEFAULT now(),
	updated_at            timestamptz NOT NULL DEFAULT now(),
	deletion_requested_at timestamptz,
	deleted_at            timestamptz
);
CREATE UNIQUE INDEX dns_records_name ON dns_records (name) WHERE deleted_at IS NULL;
CREATE INDEX dns_records_org_service ON dns_records (org_id, service_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX dns_records_service ON dns_records (service_id) WHERE deleted_at IS NULL;
CREATE INDEX dns_records_due ON dns_records (zone_id, next_pass_at, id) WHERE deleted_at IS NULL AND next_pass_at IS NOT NULL;
CREATE INDEX dns_records_cluster ON dns_records (cluster_id) WHERE deleted_at IS NULL AND cluster_id <> '';
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP TABLE dns_records, dns_services, dns_zones`).Error
		},
	}
}
