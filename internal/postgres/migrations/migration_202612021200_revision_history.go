package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202612021200RevisionHistory adds fleet_revision_history(), the
// history the hubs' revisions count in (ADR 0019): the database's system
// identifier and its current timeline. Where either cannot be read (a
// standby, a managed service that withholds a function) it answers an
// empty string, and the agents compare revisions alone rather than fail
// their reads.
func migration202612021200RevisionHistory() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202612021200",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`CREATE FUNCTION fleet_revision_history() RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN (SELECT system_identifier::text FROM pg_control_system()) || '.' ||
		substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8);
EXCEPTION WHEN OTHERS THEN
	RETURN '';
END
$$`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP FUNCTION fleet_revision_history()`).Error
		},
	}
}
