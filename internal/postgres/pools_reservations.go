package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// reservationRow is one reservation as stored.
type reservationRow struct {
	ID         string
	PoolID     string
	ClusterID  string
	OrgID      string
	Units      int
	InstanceID string
	CreatedBy  string
	CreatedAt  time.Time
}

func (r reservationRow) toReservation() fleet.Reservation {
	return fleet.Reservation{ID: r.ID, PoolID: r.PoolID, ClusterID: r.ClusterID, OrgID: r.OrgID, Units: r.Units,
		InstanceID: r.InstanceID, Owner: r.CreatedBy, CreatedAt: r.CreatedAt}
}

// chooseClusterSQL picks the cluster a booking goes to: of the pool's
// clusters in service (poolClusterInServiceSQL) that still have room, the
// fullest (as
// kas-fleet-manager bin-packs), locked. Waiting on a cluster another booking
// holds, PostgreSQL re-checks the room on the row that booking committed and
// skips it if it no longer fits, so the choice always fits; the
// pool_clusters_within_capacity CHECK holds it even if it did not.
const chooseClusterSQL = `SELECT pc.registration_id FROM pool_clusters pc
JOIN registrations r ON r.id = pc.registration_id
WHERE pc.pool_id = ? AND ` + poolClusterInServiceSQL + ` AND pc.capacity_units - pc.reserved_units >= ?
ORDER BY pc.reserved_units DESC, pc.created_at, pc.registration_id
LIMIT 1 FOR UPDATE OF pc`

// CreateReservation books units on one of the pool's clusters, the fullest
// that still fits, and wakes the pool reconciler when the cluster's load
// reached its wake point (fleet.WakePoints), where the scaler acts. When none
// fits, the pool is marked exhausted (the
// scaler adds a cluster below max_clusters) and the booking is refused with
// CodeCapacityExhausted; nothing is booked. A booking that would take the
// organisation past its max_reserved_units is refused by the Authorizer
// (decideReservation) with CodePoolQuotaExceeded.
func (s *PoolStore) CreateReservation(ctx context.Context, caller fleet.Identity, poolID string, create fleet.ReservationCreate) (fleet.Reservation, error) {
	if err := create.Validate(); err != nil {
		return fleet.Reservation{}, err
	}
	id := newID()
	exhausted := false
	// The answer is what the transaction wrote.
	booked := fleet.Reservation{ID: id, PoolID: poolID, OrgID: caller.OrgID, Owner: caller.Username, Units: create.Units, InstanceID: create.InstanceID}
	subject := fleet.SubjectFromContext(ctx, caller)
	err := s.transact(ctx, func(tx *gorm.DB) error {
		// The organisation's limit first: its lock, when a limit applies,
		// is taken before the pool's, so a deletion waiting on the pool
		// never sits between two bookings of the organisation.
		if err := s.decideReservation(ctx, tx, subject, poolID, create.Units); err != nil {
			return err
		}
		// KEY SHARE: bookings of one pool do not wait on each other at the
		// pool, only a deletion (FOR UPDATE) waits for them, and they for it.
		zones, zoneArgs := s.servedZonesSQL("zone")
		var pool poolRow
		err := tx.Raw(`SELECT id, deletion_requested_at FROM capacity_pools WHERE id = ? AND org_id = ? AND deleted_at IS NULL AND `+zones+` FOR KEY SHARE`,
			append([]any{poolID, caller.OrgID}, zoneArgs...)...).Take(&pool).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("capacity pool", poolID)
		}
		if err != nil {
			return err
		}
		if pool.DeletionRequestedAt != nil {
			return fleet.Errorf(fleet.CodeConflict, "the capacity pool is being deleted")
		}
		var cluster string
		if err := tx.Raw(chooseClusterSQL, poolID, create.Units).Scan(&cluster).Error; err != nil {
			return err
		}
		if cluster == "" {
			exhausted = true
			return fleet.Errorf(fleet.CodeCapacityExhausted, "no cluster of the capacity pool has room for the reservation")
		}
		var wake []bool
		if err := tx.Raw(`UPDATE pool_clusters SET reserved_units = reserved_units + ?, empty_since = NULL WHERE registration_id = ?
RETURNING reserved_units >= wake_at_units`, create.Units, cluster).Scan(&wake).Error; err != nil {
			return err
		}
		if err := tx.Raw(`INSERT INTO reservations (id, pool_id, cluster_id, org_id, units, instance_id, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)
RETURNING created_at`, id, poolID, cluster, caller.OrgID, create.Units, create.InstanceID, caller.Username).Scan(&booked.CreatedAt).Error; err != nil {
			return err
		}
		booked.ClusterID = cluster
		if len(wake) == 1 && !wake[0] {
			return nil // below the cluster's wake point: the scaler's decision stands
		}
		return wakeAfterCommit(tx, ChannelPools, poolID)
	})
	if exhausted {
		if markErr := s.markExhausted(ctx, poolID, create.Units); markErr != nil {
			err = errors.Join(err, markErr)
		}
	}
	if err != nil {
		return fleet.Reservation{}, fmt.Errorf("CreateReservation(%s/%s): %w", caller.OrgID, poolID, err)
	}
	return booked, nil
}

// markExhausted records that a booking of units found no room and wakes
// the pool, unless a cluster still being made (poolClusterBeingMadeSQL)
// will have room for it.
func (s *PoolStore) markExhausted(ctx context.Context, poolID string, units int) error {
	return s.transact(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec(`UPDATE capacity_pools SET exhausted_at = now() WHERE id = ? AND NOT EXISTS (SELECT 1 FROM pool_clusters pc
	JOIN registrations r ON r.id = pc.registration_id
	WHERE pc.pool_id = ? AND `+poolClusterBeingMadeSQL+` AND pc.capacity_units - pc.reserved_units >= ?)`,
			poolID, poolID, units).Error; err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelPools, poolID)
	})
}

// FindReservation returns one reservation of one of the organisation's pools.
func (s *PoolStore) FindReservation(ctx context.Context, org, poolID, id string) (fleet.Reservation, error) {
	var row reservationRow
	err := s.reservations(s.db.Gorm.WithContext(ctx), org, poolID).Where("v.id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.Reservation{}, notFound("reservation", id)
	}
	if err != nil {
		return fleet.Reservation{}, fmt.Errorf("FindReservation(%s/%s): %w", org, id, err)
	}
	return row.toReservation(), nil
}

// reservations selects the reservations of one of the organisation's pools
// in the served zones.
func (s *PoolStore) reservations(db *gorm.DB, org, poolID string) *gorm.DB {
	return s.inServedZones(db.Table("reservations AS v").Select("v.id, v.pool_id, v.cluster_id, v.org_id, v.units, v.instance_id, v.created_by, v.created_at").
		Joins("JOIN capacity_pools p ON p.id = v.pool_id AND p.deleted_at IS NULL").
		Where("v.org_id = ? AND v.pool_id = ?", org, poolID), "p.zone")
}

var reservationList = listSpec{
	search: SearchSchema{
		"id": {Column: "v.id", Type: FieldText}, "cluster_id": {Column: "v.cluster_id", Type: FieldText},
		"instance_id": {Column: "v.instance_id", Type: FieldText}, "units": {Column: "v.units", Type: FieldInteger},
		"created_by": {Column: "v.created_by", Type: FieldText}, "created_at": {Column: "v.created_at", Type: FieldTimestamp},
	},
	orderBy:      map[string]string{"created_at": "v.created_at", "units": "v.units"},
	tiebreak:     "v.id",
	defaultOrder: "v.created_at",
}

// ListReservations returns a page of one of the organisation's pools' reservations.
func (s *PoolStore) ListReservations(ctx context.Context, org, poolID string, q fleet.ListQuery) ([]fleet.Reservation, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.FindPool(ctx, org, poolID); err != nil {
		return nil, 0, err
	}
	rows, total, err := list[reservationRow](s.reservations(s.db.Gorm.WithContext(ctx), org, poolID), reservationList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListReservations(%s/%s): %w", org, poolID, err)
	}
	out := make([]fleet.Reservation, len(rows))
	for i, r := range rows {
		out[i] = r.toReservation()
	}
	return out, total, nil
}

// DeleteReservation releases a reservation: its units go back to its
// cluster. The pool reconciler sees it at its resync: what a release allows
// (fewer nodes, an idle cluster removed) waits on a cool-down or the idle
// time anyway.
func (s *PoolStore) DeleteReservation(ctx context.Context, permit fleet.Permit, org, poolID, id string) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var row reservationRow
		err := s.reservations(tx, org, poolID).Where("v.id = ?", id).Clauses(clause.Locking{Strength: "UPDATE", Table: clause.Table{Name: "v"}}).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return notFound("reservation", id)
		}
		if err != nil {
			return err
		}
		if err := permit(ctx, fleet.AuthzResource{Kind: "reservation", ID: row.ID, OrgID: row.OrgID, CreatedBy: row.CreatedBy}); err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE pool_clusters SET reserved_units = reserved_units - ?,
	empty_since = CASE WHEN reserved_units = ? THEN now() ELSE empty_since END WHERE registration_id = ?`, row.Units, row.Units, row.ClusterID).Error; err != nil {
			return err
		}
		return tx.Exec(`DELETE FROM reservations WHERE id = ?`, id).Error
	})
	if err != nil {
		return fmt.Errorf("DeleteReservation(%s/%s/%s): %w", org, poolID, id, err)
	}
	return nil
}
