package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// tombstoneTables are the inventory tables whose tombstones the purge may
// delete. Each has id, deleted_at and the change position (change_xid,
// change_seq) of the feed; the table name is spliced into SQL, so only
// these names are accepted.
var tombstoneTables = map[string]bool{"managed_clusters": true, "resources": true}

// TombstoneTables returns the inventory tables whose tombstones
// PurgeTombstones deletes, sorted: the tables the purge sweeps.
func TombstoneTables() []string {
	return slices.Sorted(maps.Keys(tombstoneTables))
}

// purgeTombstonesSQL deletes one batch of tombstones older than the cutoff,
// skipping rows another replica's purge holds, and raises the table's purge
// horizon to the highest position it deleted, in the same statement. It
// takes only tombstones the feed can already read (written below feedBound),
// so the horizon never passes a cursor a list hands out after it.
const purgeTombstonesSQL = `
WITH doomed AS (
	SELECT id FROM %[1]s WHERE deleted_at IS NOT NULL AND deleted_at < ?
		AND change_xid < ?::xid8
	LIMIT ? FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM %[1]s t USING doomed d WHERE t.id = d.id RETURNING t.change_xid, t.change_seq
), horizon AS (
	INSERT INTO inventory_purge_horizon AS h (table_name, change_xid, change_seq)
	SELECT ?, change_xid, change_seq FROM gone ORDER BY change_xid DESC, change_seq DESC LIMIT 1
	ON CONFLICT (table_name) DO UPDATE SET change_xid = excluded.change_xid, change_seq = excluded.change_seq, purged_at = now()
	WHERE (h.change_xid, h.change_seq) < (excluded.change_xid, excluded.change_seq)
)
SELECT count(*) FROM gone`

// PurgeTombstones deletes up to limit tombstones of table deleted before
// cutoff and returns how many it deleted; the caller repeats while a batch
// comes back full. Errors: CodeValidation for a table that is not an
// inventory table.
func (s *InventoryStore) PurgeTombstones(ctx context.Context, table string, cutoff time.Time, limit int) (int, error) {
	if !tombstoneTables[table] {
		return 0, fleet.Errorf(fleet.CodeValidation, "PurgeTombstones(%s): not an inventory table", table)
	}
	bound, err := feedBound(s.db.Gorm.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("PurgeTombstones(%s): %w", table, err)
	}
	var n int
	err = s.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(purgeTombstonesSQL, table), cutoff, strconv.FormatUint(bound, 10), limit, table).
		Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("PurgeTombstones(%s): %w", table, err)
	}
	return n, nil
}
