package fleet

import (
	"context"
	"time"
)

// OrgLimits are what one organisation may hold of capacity pools: live
// pools, live pool clusters and reserved units. 0 means no limit. The
// deployment's defaults are flags (--pool-quota, --pool-cluster-quota,
// --reserved-units-quota); an administrator overrides them per
// organisation (OrgLimitOverrides).
type OrgLimits struct {
	Pools         int
	PoolClusters  int
	ReservedUnits int
}

// OrgUsage is what an organisation holds, as its limits count it: live pools
// (one being deleted counts until it is gone), live pool clusters (one
// being removed counts until its registration is deleted, as the
// registration quota counts) and the units its reservations book.
type OrgUsage struct {
	Pools         int
	PoolClusters  int
	ReservedUnits int
}

// OrgLimitOverrides are an organisation's own limits; a nil field keeps the
// deployment's default.
type OrgLimitOverrides struct {
	Pools         *int
	PoolClusters  *int
	ReservedUnits *int
}

// Apply returns defaults with the overrides set in o.
func (o OrgLimitOverrides) Apply(defaults OrgLimits) OrgLimits {
	out := defaults
	if o.Pools != nil {
		out.Pools = *o.Pools
	}
	if o.PoolClusters != nil {
		out.PoolClusters = *o.PoolClusters
	}
	if o.ReservedUnits != nil {
		out.ReservedUnits = *o.ReservedUnits
	}
	return out
}

// The limits' names, as the API, the refusals and the docs call them.
const (
	LimitMaxPools         = "max_pools"
	LimitMaxPoolClusters  = "max_pool_clusters"
	LimitMaxReservedUnits = "max_reserved_units"
)

// MaxOrgLimit bounds a limit's value: the columns are 32-bit.
const MaxOrgLimit = 1<<31 - 1

// OrgLimitsPatch changes an organisation's overrides: each field of Set
// becomes its own limit, each name in Reset goes back to the default.
type OrgLimitsPatch struct {
	Set   OrgLimitOverrides
	Reset []string
}

// Validate checks the values and names, naming the field at fault (never
// the value).
func (p OrgLimitsPatch) Validate() error {
	for name, v := range map[string]*int{LimitMaxPools: p.Set.Pools, LimitMaxPoolClusters: p.Set.PoolClusters, LimitMaxReservedUnits: p.Set.ReservedUnits} {
		if v != nil && (*v < 0 || *v > MaxOrgLimit) {
			return Errorf(CodeValidation, "%s must be from 0 (no limit) to %d", name, MaxOrgLimit)
		}
	}
	return nil
}

// OrgLimitsStatus is an organisation's limits as an administrator reads
// them: what applies, what of it is the organisation's own, and what the
// organisation holds.
type OrgLimitsStatus struct {
	OrgID     string
	Limits    OrgLimits
	Overrides OrgLimitOverrides
	Usage     OrgUsage
	// UpdatedAt is when the overrides last changed; nil when there are none.
	UpdatedAt *time.Time
	UpdatedBy string
}

// OrgLimitsAdmin reads and changes organisations' limits (the admin API).
type OrgLimitsAdmin interface {
	// FindOrgLimits returns an organisation's limits and usage; an
	// organisation the service never saw has the defaults and holds nothing.
	FindOrgLimits(ctx context.Context, org string) (OrgLimitsStatus, error)
	// UpdateOrgLimits changes an organisation's overrides. Errors:
	// CodeValidation.
	UpdateOrgLimits(ctx context.Context, org, by string, patch OrgLimitsPatch) (OrgLimitsStatus, error)
}
