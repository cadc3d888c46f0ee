package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612021600DNSRecordCounts keeps each DNS service's live records
// counted, so that a list of services answers its counts from a few counter
// rows, not by counting the records of each (that grew with the fleet). A
// row trigger on dns_records adds a record as it is inserted live and takes
// it off when it is soft-deleted (or deleted live). Each service's count is
// split into shards by a hash of the record's id, as the registration
// counters are (ADR 0014), so that two concurrent creates of one service
// rarely wait on one counter row.
func migration202612021600DNSRecordCounts() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021600",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE dns_service_record_counts (
	service_id text NOT NULL,
	shard      smallint NOT NULL,
	live       bigint NOT NULL,
	PRIMARY KEY (service_id, shard)
);
CREATE FUNCTION dns_service_record_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	r     dns_records;
	delta bigint;
BEGIN
	IF TG_OP = 'INSERT' AND NEW.deleted_at IS NULL THEN
		r := NEW; delta := 1;
	ELSIF TG_OP = 'UPDATE' AND OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
		r := OLD; delta := -1;
	ELSIF TG_OP = 'DELETE' AND OLD.deleted_at IS NULL THEN
		r := OLD; delta := -1;
	ELSE
		RETURN NULL;
	END IF;
	INSERT INTO dns_service_record_counts (service_id, shard, live) VALUES (r.service_id, abs(hashtext(r.id)) % 16, delta)
	ON CONFLICT (service_id, shard) DO UPDATE SET live = dns_service_record_counts.live + EXCLUDED.live;
	RETURN NULL;
END $$;
CREATE TRIGGER dns_records_count AFTER INSERT OR UPDATE OF deleted_at OR DELETE ON dns_records
	FOR EACH ROW EXECUTE FUNCTION dns_service_record_count();
INSERT INTO dns_service_record_counts (service_id, shard, live)
	SELECT service_id, abs(hashtext(id)) % 16, count(*) FROM dns_records WHERE deleted_at IS NULL GROUP BY 1, 2;
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP TRIGGER dns_records_count ON dns_records; DROP FUNCTION dns_service_record_count(); DROP TABLE dns_service_record_counts`).Error
		},
	}
}
