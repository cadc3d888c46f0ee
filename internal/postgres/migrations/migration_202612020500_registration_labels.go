package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612020500RegistrationLabels keeps every label of every live
// registration as a row of registration_labels, keyed by the organisation,
// the label and the registration's place in the list's default order
// (created_at, id), with its zone, so that a search by one label's value
// (`labels.team = 'team-7'`) is counted and paged from that index alone,
// whatever the key: without it, such a search of a key that is not counted
// (migration202612012100RegistrationLabelCounts) read every matching
// registration's row to count them, and a rare value's page walked the
// organisation's rows in order until it found a page of them
// (docs/performance.md). Triggers keep the rows with the registrations, in
// the statement that changes them: inserts per statement, from its
// transition table; label, zone and deletion changes per row, only when one
// of those columns moved (the queue's updates never set them, so never run
// it); hard deletes and TRUNCATE per statement.
func migration202612020500RegistrationLabels() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612020500",
		Migrate: func(tx *gorm.DB) error {
			// Writes to registrations wait from the backfill's snapshot until
			// the triggers exist, so that no registration written meanwhile
			// by a replica still running is left out of both.
			return tx.Exec(`
LOCK TABLE registrations IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE registration_labels (
	org_id     text        NOT NULL,
	key        text        NOT NULL,
	value      text        NOT NULL,
	created_at timestamptz NOT NULL,
	id         text        NOT NULL,
	zone       text        NOT NULL,
	PRIMARY KEY (org_id, key, value, created_at, id) INCLUDE (zone)
);
INSERT INTO registration_labels (org_id, key, value, created_at, id, zone)
	` + registrationLabelRows("registrations") + `;
CREATE FUNCTION registration_labels_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO registration_labels (org_id, key, value, created_at, id, zone)
		` + registrationLabelRows("new_rows") + `;
	RETURN NULL;
END $$;
CREATE FUNCTION registration_labels_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.deleted_at IS NULL THEN
		DELETE FROM registration_labels t USING jsonb_each_text(` + labelObject("OLD") + `) AS l
		WHERE t.org_id = OLD.org_id AND t.key = l.key AND t.value = l.value AND t.created_at = OLD.created_at AND t.id = OLD.id;
	END IF;
	IF NEW.deleted_at IS NULL THEN
		INSERT INTO registration_labels (org_id, key, value, created_at, id, zone)
			SELECT NEW.org_id, l.key, l.value, NEW.created_at, NEW.id, NEW.zone FROM jsonb_each_text(` + labelObject("NEW") + `) AS l;
	END IF;
	RETURN NULL;
END $$;
CREATE FUNCTION registration_labels_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'TRUNCATE' THEN
		DELETE FROM registration_labels;
	ELSE
		DELETE FROM registration_labels t USING (` + registrationLabelRows("old_rows") + `) AS o
		WHERE (t.org_id, t.key, t.value, t.created_at, t.id) = (o.org_id, o.key, o.value, o.created_at, o.id);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER registration_labels_insert AFTER INSERT ON registrations
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION registration_labels_insert();
CREATE TRIGGER registration_labels_update AFTER UPDATE OF labels, deleted_at, zone, org_id, created_at ON registrations
	FOR EACH ROW WHEN (OLD.labels IS DISTINCT FROM NEW.labels OR (OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL)
		OR OLD.zone IS DISTINCT FROM NEW.zone OR OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.created_at IS DISTINCT FROM NEW.created_at)
	EXECUTE FUNCTION registration_labels_update();
CREATE TRIGGER registration_labels_delete AFTER DELETE ON registrations
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION registration_labels_delete();
CREATE TRIGGER registration_labels_truncate AFTER TRUNCATE ON registrations
	FOR EACH STATEMENT EXECUTE FUNCTION registration_labels_delete();
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TRIGGER registration_labels_truncate ON registrations;
DROP TRIGGER registration_labels_delete ON registrations;
DROP TRIGGER registration_labels_update ON registrations;
DROP TRIGGER registration_labels_insert ON registrations;
DROP FUNCTION registration_labels_delete();
DROP FUNCTION registration_labels_update();
DROP FUNCTION registration_labels_insert();
DROP TABLE registration_labels;
`).Error
		},
	}
}

// registrationLabelRows selects the labels of the live rows of table (a
// transition table, or registrations) as rows of registration_labels.
func registrationLabelRows(table string) string {
	return `SELECT t.org_id, l.key, l.value, t.created_at, t.id, t.zone
		FROM ` + table + ` t CROSS JOIN LATERAL jsonb_each_text(` + labelObject("t") + `) AS l
		WHERE t.deleted_at IS NULL`
}

// labelObject is the labels of row, or NULL (no labels) when they are not a
// JSON object.
func labelObject(row string) string {
	return `CASE WHEN jsonb_typeof(` + row + `.labels) = 'object' THEN ` + row + `.labels END`
}
