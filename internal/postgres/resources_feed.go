package postgres

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// resourceFeedRow is a resources row as a kind's change feed reads it, with
// its position and, for a tombstone, when it went.
type resourceFeedRow struct {
	Row    resourceRow `gorm:"embedded"`
	GoneAt *time.Time
	Pos    feedPos `gorm:"embedded"`
}

func (r resourceFeedRow) position() (changePosition, error) { return r.Pos.position() }

// ResourceCursor returns the cursor of the kinds' change feeds as of a list
// read after it (feedCursor). The position is the clusters' too: both
// tables take theirs from one sequence, on one timeline.
func (s *InventoryStore) ResourceCursor(ctx context.Context) (string, error) {
	c, err := s.feedCursor(ctx)
	if err != nil {
		return "", fmt.Errorf("ResourceCursor(): %w", err)
	}
	return c, nil
}

// ListResourceChanges reads, in one snapshot, the purge horizon of
// resources and the changes of kind after the cursor, oldest first, scoped
// as ListResources and to hubID when it is set. Without a hub it walks the
// (api_group, kind, change_xid, change_seq) index (walkFeedIndex); one hub's
// objects may be few among the kind's, so the planner is then left to find
// them by the hub's key.
func (s *InventoryStore) ListResourceChanges(ctx context.Context, kind fleet.ResourceKind, hubID, after string, size int) (fleet.ResourceChangePage, error) {
	src := feedSource{table: "resources", walk: hubID == "",
		expired: "the cursor is older than the retention of deleted objects: " +
			"list GET /admin/resources again and resume the feed from the cursor that list returns",
		scope: func(q *gorm.DB) *gorm.DB { return q.Where("api_group = ? AND kind = ?", kind.Group, kind.Kind) }}
	got, err := readFeed(ctx, s.core, s.db, src, after, size, func(tx *gorm.DB, from changePosition, bound uint64, size int) ([]resourceFeedRow, error) {
		query := tx.Table("resources AS r").
			Select(`r.*, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region,
	coalesce(r.deleted_at, h.deleted_at) AS gone_at, r.change_xid::text AS pos_xid, r.change_seq AS pos_seq`).
			Joins("JOIN hubs h ON h.id = r.hub_id").
			Where("r.api_group = ? AND r.kind = ?", kind.Group, kind.Kind)
		query = s.inServedZones(query, "r.zone")
		if hubID != "" {
			query = query.Where("r.hub_id = ?", hubID)
		}
		var rows []resourceFeedRow
		err := changesBetween(query, "r", from, bound, size).Scan(&rows).Error
		return rows, err
	})
	if err != nil {
		return fleet.ResourceChangePage{}, fmt.Errorf("ListResourceChanges(%s): %w", kind.Kind, err)
	}
	page := fleet.ResourceChangePage{Items: make([]fleet.ResourceChange, len(got.rows)), Cursor: got.cursor, Pending: got.pending}
	for i, r := range got.rows {
		page.Items[i] = fleet.ResourceChange{Resource: r.Row.toResource(), DeletedAt: r.GoneAt}
	}
	return page, nil
}
