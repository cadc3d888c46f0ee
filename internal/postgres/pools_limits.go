package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// orgLimitsRow is an organisation's overrides as stored; NULL keeps the
// deployment's default.
type orgLimitsRow struct {
	OrgID            string
	MaxPools         *int
	MaxPoolClusters  *int
	MaxReservedUnits *int
	UpdatedBy        string
	UpdatedAt        time.Time
}

func (r orgLimitsRow) overrides() fleet.OrgLimitOverrides {
	return fleet.OrgLimitOverrides{Pools: r.MaxPools, PoolClusters: r.MaxPoolClusters, ReservedUnits: r.MaxReservedUnits}
}

// orgOverrides reads org's overrides; found is false when it has none.
func orgOverrides(db *gorm.DB, org string) (row orgLimitsRow, found bool, err error) {
	err = db.Raw(`SELECT * FROM org_limits WHERE org_id = ?`, org).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, false, nil
	}
	return row, err == nil, err
}

// orgLimits returns the limits that apply to org: its overrides over the
// deployment's defaults.
func (s *PoolStore) orgLimits(db *gorm.DB, org string) (fleet.OrgLimits, error) {
	row, _, err := orgOverrides(db, org)
	if err != nil {
		return fleet.OrgLimits{}, err
	}
	return row.overrides().Apply(s.cfg.Pools.Limits), nil
}

// The organisation's usage, one count each. A pool counts until it is
// deleted (its clusters go first); a pool cluster until its registration
// is deleted, as the registration quota counts a deregistering cluster.
// Clusters and units are read through the organisation's live pools: a
// deleted pool has neither.
const (
	countOrgPoolsSQL        = `SELECT count(*) FROM capacity_pools WHERE org_id = ? AND deleted_at IS NULL`
	countOrgPoolClustersSQL = `SELECT count(*) FROM capacity_pools p JOIN pool_clusters pc ON pc.pool_id = p.id
	JOIN registrations r ON r.id = pc.registration_id AND r.deleted_at IS NULL WHERE p.org_id = ? AND p.deleted_at IS NULL`
	sumOrgReservedUnitsSQL = `SELECT coalesce(sum(pc.reserved_units), 0) FROM capacity_pools p JOIN pool_clusters pc ON pc.pool_id = p.id
	WHERE p.org_id = ? AND p.deleted_at IS NULL`
)

// orgCount runs one of the usage counts for org.
func orgCount(db *gorm.DB, query, org string) (int, error) {
	var n int64
	err := db.Raw(query, org).Scan(&n).Error
	return int(n), err
}

// lockOrg takes the transaction's advisory lock name:<org>: what decides a
// limit of the organisation counts under it, so two decisions at the limit
// never both pass. registrations:<org> is the registration quota's (a pool
// cluster is a registration); pools:<org> and reservations:<org> are the
// pool and unit limits'.
func lockOrg(tx *gorm.DB, name, org string) error {
	return tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended(? || ':' || ?, 0))`, name, org).Error
}

// usageReader is the side of a fleet.Authorizer (authz.Authorizer's) that
// tells whether a decision can depend on OrgUsage where no limit applies.
type usageReader interface {
	ReadsOrgUsage() bool
}

// readsUsage tells whether a booking must sum its organisation's reserved
// units when no limit applies: when the Authorizer may decide on them
// anyway, or cannot tell.
func (s *PoolStore) readsUsage() bool {
	r, ok := s.authz.(usageReader)
	return !ok || r.ReadsOrgUsage()
}

// decidePoolCreate asks the Authorizer, in the create's transaction, whether
// subject's organisation may have one more pool, counted under pools:<org>.
func (s *PoolStore) decidePoolCreate(ctx context.Context, tx *gorm.DB, subject fleet.Subject) error {
	limits, err := s.orgLimits(tx, subject.OrgID)
	if err != nil {
		return err
	}
	if err := lockOrg(tx, "pools", subject.OrgID); err != nil {
		return err
	}
	// The count is a statement of its own after the lock's: its snapshot
	// holds the commit of the create that held the lock before.
	pools, err := orgCount(tx, countOrgPoolsSQL, subject.OrgID)
	if err != nil {
		return err
	}
	return s.authz.Authorize(ctx, fleet.AuthzRequest{Subject: subject, Action: fleet.ActionPoolsCreate,
		Resource: fleet.AuthzResource{Kind: "pool", OrgID: subject.OrgID}, OrgLimits: limits, OrgUsage: fleet.OrgUsage{Pools: pools}})
}

// decidePoolCluster asks the Authorizer, in pool_mgr's pass, whether the
// pool may register one more cluster: its organisation's pool clusters
// against max_pool_clusters and, a pool cluster being a registration, its
// live registrations against --registration-quota. Both are counted under
// registrations:<org>, the lock user creates count under too. The subject
// is the pool's owner acting as an admin of its organisation, as every
// caller of the store outside a request.
func (s *PoolStore) decidePoolCluster(ctx context.Context, tx *gorm.DB, pool fleet.CapacityPool) error {
	limits, err := s.orgLimits(tx, pool.OrgID)
	if err != nil {
		return err
	}
	if err := lockOrg(tx, "registrations", pool.OrgID); err != nil {
		return err
	}
	clusters, err := orgCount(tx, countOrgPoolClustersSQL, pool.OrgID)
	if err != nil {
		return err
	}
	var live int64
	if s.regs.countsLive() {
		if err := tx.Raw(`SELECT coalesce(sum(live), 0) FROM registration_counts WHERE org_id = ?`, pool.OrgID).Scan(&live).Error; err != nil {
			return err
		}
	}
	subject := fleet.SubjectFromContext(ctx, fleet.Identity{OrgID: pool.OrgID, Username: pool.Owner})
	return s.authz.Authorize(ctx, fleet.AuthzRequest{Subject: subject, Action: fleet.ActionPoolsAddCluster,
		Resource:          fleet.AuthzResource{Kind: "pool", ID: pool.ID, OrgID: pool.OrgID, CreatedBy: pool.Owner},
		LiveRegistrations: int(live), OrgLimits: limits, OrgUsage: fleet.OrgUsage{PoolClusters: clusters}})
}

// decideReservation asks the Authorizer, in the booking's transaction,
// whether subject's organisation may book units more. Its reserved units
// are summed under reservations:<org> only when a limit applies to them
// (or the policy may read them without one): without, bookings of one
// organisation do not wait on each other.
func (s *PoolStore) decideReservation(ctx context.Context, tx *gorm.DB, subject fleet.Subject, poolID string, units int) error {
	limits, err := s.orgLimits(tx, subject.OrgID)
	if err != nil {
		return err
	}
	var usage fleet.OrgUsage
	if limits.ReservedUnits > 0 || s.readsUsage() {
		if err := lockOrg(tx, "reservations", subject.OrgID); err != nil {
			return err
		}
		if usage.ReservedUnits, err = orgCount(tx, sumOrgReservedUnitsSQL, subject.OrgID); err != nil {
			return err
		}
	}
	return s.authz.Authorize(ctx, fleet.AuthzRequest{Subject: subject, Action: fleet.ActionReservationsCreate,
		Resource: fleet.AuthzResource{Kind: "reservation", OrgID: subject.OrgID, ID: poolID}, OrgLimits: limits, OrgUsage: usage, Units: units})
}

// FindOrgLimits returns an organisation's limits, overrides and usage.
func (s *PoolStore) FindOrgLimits(ctx context.Context, org string) (fleet.OrgLimitsStatus, error) {
	out, err := s.orgLimitsStatus(s.db.Gorm.WithContext(ctx), org)
	if err != nil {
		return out, fmt.Errorf("FindOrgLimits(%s): %w", org, err)
	}
	return out, nil
}

// orgLimitsStatus reads what FindOrgLimits answers.
func (s *PoolStore) orgLimitsStatus(db *gorm.DB, org string) (fleet.OrgLimitsStatus, error) {
	out := fleet.OrgLimitsStatus{OrgID: org}
	row, found, err := orgOverrides(db, org)
	if err != nil {
		return out, err
	}
	out.Overrides = row.overrides()
	out.Limits = out.Overrides.Apply(s.cfg.Pools.Limits)
	if found {
		out.UpdatedAt, out.UpdatedBy = &row.UpdatedAt, row.UpdatedBy
	}
	for _, c := range []struct {
		query string
		into  *int
	}{{countOrgPoolsSQL, &out.Usage.Pools}, {countOrgPoolClustersSQL, &out.Usage.PoolClusters}, {sumOrgReservedUnitsSQL, &out.Usage.ReservedUnits}} {
		if *c.into, err = orgCount(db, c.query, org); err != nil {
			return out, err
		}
	}
	return out, nil
}

// UpdateOrgLimits sets or resets an organisation's overrides. Lowering a
// limit below what the organisation holds removes nothing: its next pool,
// cluster or booking is refused until it is below again.
func (s *PoolStore) UpdateOrgLimits(ctx context.Context, org, by string, patch fleet.OrgLimitsPatch) (fleet.OrgLimitsStatus, error) {
	if err := patch.Validate(); err != nil {
		return fleet.OrgLimitsStatus{}, err
	}
	var out fleet.OrgLimitsStatus
	err := s.transact(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec(`INSERT INTO org_limits (org_id) VALUES (?) ON CONFLICT (org_id) DO NOTHING`, org).Error; err != nil {
			return err
		}
		set := map[string]any{"updated_by": by, "updated_at": gorm.Expr("now()")}
		for col, v := range map[string]*int{"max_pools": patch.Set.Pools, "max_pool_clusters": patch.Set.PoolClusters,
			"max_reserved_units": patch.Set.ReservedUnits} {
			if v != nil {
				set[col] = *v
			}
		}
		for _, name := range patch.Reset {
			if !slices.Contains([]string{fleet.LimitMaxPools, fleet.LimitMaxPoolClusters, fleet.LimitMaxReservedUnits}, name) {
				return fleet.Errorf(fleet.CodeValidation, "an override to reset must be one of %s, %s, %s",
					fleet.LimitMaxPools, fleet.LimitMaxPoolClusters, fleet.LimitMaxReservedUnits)
			}
			set[name] = nil
		}
		if err := tx.Table("org_limits").Where("org_id = ?", org).Updates(set).Error; err != nil {
			return err
		}
		// A row with no override left is no row: the defaults apply.
		if err := tx.Exec(`DELETE FROM org_limits WHERE org_id = ? AND max_pools IS NULL AND max_pool_clusters IS NULL
	AND max_reserved_units IS NULL`, org).Error; err != nil {
			return err
		}
		var err error
		out, err = s.orgLimitsStatus(tx, org)
		return err
	})
	if err != nil {
		return fleet.OrgLimitsStatus{}, fmt.Errorf("UpdateOrgLimits(%s): %w", org, err)
	}
	return out, nil
}
