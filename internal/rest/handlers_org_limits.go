package rest

import (
	"encoding/json"
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

func (s *Server) handleOrgLimitsGet(w http.ResponseWriter, r *http.Request) error {
	st, err := s.services.Pools.FindOrgLimits(r.Context(), pathParam(r, "org_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.presentOrgLimits(st))
	return nil
}

// handleOrgLimitsUpdate reads the patch as JSON merge patch does: a limit
// named with a number is set, one named with null goes back to its default.
func (s *Server) handleOrgLimitsUpdate(w http.ResponseWriter, r *http.Request) error {
	var body map[string]*json.Number
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	var patch fleet.OrgLimitsPatch
	for name, into := range map[string]**int{fleet.LimitMaxPools: &patch.Set.Pools, fleet.LimitMaxPoolClusters: &patch.Set.PoolClusters,
		fleet.LimitMaxReservedUnits: &patch.Set.ReservedUnits} {
		v, named := body[name]
		switch {
		case !named:
		case v == nil:
			patch.Reset = append(patch.Reset, name)
		default:
			n, err := v.Int64()
			if err != nil || n < 0 || n > fleet.MaxOrgLimit {
				return fleet.Errorf(fleet.CodeValidation, "%s must be an integer from 0 (no limit) to %d, or null", name, fleet.MaxOrgLimit)
			}
			limit := int(n)
			*into = &limit
		}
	}
	st, err := s.services.Pools.UpdateOrgLimits(r.Context(), pathParam(r, "org_id"), caller(r).Username, patch)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.presentOrgLimits(st))
	return nil
}

func (s *Server) presentOrgLimits(st fleet.OrgLimitsStatus) admin.OrganizationLimits {
	i32 := func(v *int) *int32 {
		if v == nil {
			return nil
		}
		n := int32(*v)
		return &n
	}
	return admin.OrganizationLimits{Kind: admin.OrganizationLimitsKindOrganizationLimits, Id: st.OrgID,
		Href: s.cfg.BasePath + "/admin/organizations/" + st.OrgID + "/limits", OrgId: st.OrgID,
		Limits: admin.OrgLimitValues{MaxPools: int32(st.Limits.Pools), MaxPoolClusters: int32(st.Limits.PoolClusters),
			MaxReservedUnits: int32(st.Limits.ReservedUnits)},
		Overrides: admin.OrgLimitOverrides{MaxPools: i32(st.Overrides.Pools), MaxPoolClusters: i32(st.Overrides.PoolClusters),
			MaxReservedUnits: i32(st.Overrides.ReservedUnits)},
		Usage:     admin.OrgUsage{Pools: st.Usage.Pools, PoolClusters: st.Usage.PoolClusters, ReservedUnits: int64(st.Usage.ReservedUnits)},
		UpdatedAt: st.UpdatedAt, UpdatedBy: strPtr(st.UpdatedBy)}
}
