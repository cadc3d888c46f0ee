package rest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// blueprintSpec reads the API's blueprint spec. The two types are one JSON
// document (the domain's tags follow the specification), so the spec's own
// validation has already checked its shape; the domain checks the rest.
func blueprintSpec(in public.BlueprintSpec) (fleet.BlueprintSpec, error) {
	var out fleet.BlueprintSpec
	if err := sameJSON(in, &out); err != nil {
		return out, fleet.Errorf(fleet.CodeMalformedBody, "spec cannot be read")
	}
	return out, nil
}

// presentSpec renders a blueprint spec for the API.
func presentSpec(in fleet.BlueprintSpec) public.BlueprintSpec {
	var out public.BlueprintSpec
	_ = sameJSON(in, &out) // a stored spec was read into the same shape
	return out
}

// sameJSON copies in to out through their common JSON form.
func sameJSON(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (s *Server) handleBlueprintCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.BlueprintCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	spec, err := blueprintSpec(body.Spec)
	if err != nil {
		return err
	}
	b, err := s.services.Blueprints.CreateBlueprint(r.Context(), caller(r), body.Name, spec)
	if err != nil {
		return err
	}
	out := s.presentBlueprint(b)
	w.Header().Set("Location", out.Href)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) handleBlueprintList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.Blueprints.ListBlueprints(r.Context(), caller(r).OrgID, q)
	if err != nil {
		return err
	}
	items := make([]public.Blueprint, len(list))
	for i, b := range list {
		items[i] = s.presentBlueprint(b)
	}
	writeJSON(w, http.StatusOK, public.BlueprintList{Kind: public.BlueprintListKindBlueprintList, Page: q.Page, Size: len(items), Total: total, Items: items})
	return nil
}

func (s *Server) handleBlueprintGet(w http.ResponseWriter, r *http.Request) error {
	b, err := s.services.Blueprints.FindBlueprint(r.Context(), caller(r).OrgID, pathParam(r, "id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.presentBlueprint(b))
	return nil
}

func (s *Server) handleBlueprintDelete(w http.ResponseWriter, r *http.Request) error {
	if err := s.services.Blueprints.DeleteBlueprint(r.Context(), s.permit(r, fleet.ActionBlueprintsDelete), caller(r).OrgID, pathParam(r, "id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleBlueprintVersionCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.BlueprintVersionCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	spec, err := blueprintSpec(body.Spec)
	if err != nil {
		return err
	}
	v, err := s.services.Blueprints.CreateBlueprintVersion(r.Context(), s.permit(r, fleet.ActionBlueprintsUpdate), caller(r), pathParam(r, "id"), spec)
	if err != nil {
		return err
	}
	out := s.presentBlueprintVersion(v)
	w.Header().Set("Location", out.Href)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) handleBlueprintVersionList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.Blueprints.ListBlueprintVersions(r.Context(), caller(r).OrgID, pathParam(r, "id"), q)
	if err != nil {
		return err
	}
	items := make([]public.BlueprintVersion, len(list))
	for i, v := range list {
		items[i] = s.presentBlueprintVersion(v)
	}
	writeJSON(w, http.StatusOK, public.BlueprintVersionList{Kind: public.BlueprintVersionListKindBlueprintVersionList, Page: q.Page,
		Size: len(items), Total: total, Items: items})
	return nil
}

// versionParam reads the path's version, which the specification bounds.
func versionParam(r *http.Request) (int, error) {
	v, err := strconv.Atoi(pathParam(r, "version"))
	if err != nil {
		return 0, fleet.Errorf(fleet.CodeValidation, "version must be an integer")
	}
	return v, nil
}

func (s *Server) handleBlueprintVersionGet(w http.ResponseWriter, r *http.Request) error {
	version, err := versionParam(r)
	if err != nil {
		return err
	}
	v, err := s.services.Blueprints.FindBlueprintVersion(r.Context(), caller(r).OrgID, pathParam(r, "id"), version)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.presentBlueprintVersion(v))
	return nil
}

func (s *Server) handleBlueprintVersionDelete(w http.ResponseWriter, r *http.Request) error {
	version, err := versionParam(r)
	if err != nil {
		return err
	}
	if err := s.services.Blueprints.DeleteBlueprintVersion(r.Context(), s.permit(r, fleet.ActionBlueprintsDelete), caller(r).OrgID, pathParam(r, "id"), version); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) presentBlueprint(b fleet.Blueprint) public.Blueprint {
	return public.Blueprint{Kind: public.BlueprintKindBlueprint, Id: b.ID, Href: s.cfg.BasePath + "/blueprints/" + b.ID, Name: b.Name,
		LatestVersion: b.LatestVersion, Spec: presentSpec(b.Latest), CreatedBy: strPtr(b.Owner), CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt}
}

func (s *Server) presentBlueprintVersion(v fleet.BlueprintVersion) public.BlueprintVersion {
	return public.BlueprintVersion{Kind: public.BlueprintVersionKindBlueprintVersion, Id: strconv.Itoa(v.Version),
		Href: fmt.Sprintf("%s/blueprints/%s/versions/%d", s.cfg.BasePath, v.BlueprintID, v.Version), BlueprintId: v.BlueprintID,
		Version: v.Version, Spec: presentSpec(v.Spec), PoolCount: v.Pools, CreatedAt: v.CreatedAt}
}

// poolCredentials reads the API's pool credentials.
func poolCredentials(c *public.PoolCredentials) *fleet.PoolCredentials {
	if c == nil {
		return nil
	}
	return &fleet.PoolCredentials{Cloud: maps.Clone(c.Cloud), PullSecret: c.PullSecret}
}

func (s *Server) handlePoolCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.CapacityPoolCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	p, err := s.services.Pools.CreatePool(r.Context(), caller(r), fleet.PoolCreate{
		Name: body.Name, BlueprintID: body.BlueprintId, BlueprintVersion: body.BlueprintVersion, Cloud: fleet.Cloud(body.Cloud),
		Region: body.Region, Zone: deref(body.Zone), MinClusters: body.MinClusters, MaxClusters: body.MaxClusters,
		UnitsPerCluster: body.UnitsPerCluster, ScaleUpPercent: derefOr(body.ScaleUpPercent), AddClusterPercent: derefOr(body.AddClusterPercent),
		Credentials: poolCredentials(&body.Credentials),
	})
	if err != nil {
		return err
	}
	out := s.presentPool(p)
	w.Header().Set("Location", out.Href)
	w.Header().Set("ETag", fleet.ETag(p.Generation))
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) handlePoolList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.Pools.ListPools(r.Context(), caller(r).OrgID, q)
	if err != nil {
		return err
	}
	items := make([]public.CapacityPool, len(list))
	for i, p := range list {
		items[i] = s.presentPool(p)
	}
	writeJSON(w, http.StatusOK, public.CapacityPoolList{Kind: public.CapacityPoolListKindCapacityPoolList, Page: q.Page, Size: len(items),
		Total: total, Items: items})
	return nil
}

func (s *Server) handlePoolGet(w http.ResponseWriter, r *http.Request) error {
	p, err := s.services.Pools.FindPool(r.Context(), caller(r).OrgID, pathParam(r, "id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(p.Generation))
	writeJSON(w, http.StatusOK, s.presentPool(p))
	return nil
}

func (s *Server) handlePoolUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body public.CapacityPoolPatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	p, err := s.services.Pools.UpdatePool(r.Context(), s.permit(r, fleet.ActionPoolsUpdate), caller(r).OrgID, pathParam(r, "id"), match, fleet.PoolUpdate{
		BlueprintVersion: body.BlueprintVersion, MinClusters: body.MinClusters, MaxClusters: body.MaxClusters,
		ScaleUpPercent: body.ScaleUpPercent, AddClusterPercent: body.AddClusterPercent, Credentials: poolCredentials(body.Credentials),
	})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(p.Generation))
	writeJSON(w, http.StatusOK, s.presentPool(p))
	return nil
}

func (s *Server) handlePoolDelete(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := s.services.Pools.RequestPoolDeletion(r.Context(), s.permit(r, fleet.ActionPoolsDelete), caller(r).OrgID, pathParam(r, "id"), match); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (s *Server) presentPool(p fleet.CapacityPool) public.CapacityPool {
	return public.CapacityPool{Kind: public.CapacityPoolKindCapacityPool, Id: p.ID, Href: s.cfg.BasePath + "/capacity_pools/" + p.ID,
		Name: p.Name, Zone: p.Zone, Cloud: public.Cloud(p.Cloud), Region: p.Region, BlueprintId: p.BlueprintID, BlueprintVersion: p.BlueprintVersion,
		MinClusters: p.MinClusters, MaxClusters: p.MaxClusters, UnitsPerCluster: p.UnitsPerCluster,
		ScaleUpPercent: &p.ScaleUpPercent, AddClusterPercent: &p.AddClusterPercent, ClusterCount: p.Clusters, ReservedUnits: p.ReservedUnits,
		Phase: public.CapacityPoolPhase(p.Phase()), Conditions: presentConditions(p.Conditions), Generation: p.Generation, CreatedBy: strPtr(p.Owner), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func (s *Server) handlePoolClusterList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.Pools.ListPoolClusters(r.Context(), caller(r).OrgID, pathParam(r, "id"), q)
	if err != nil {
		return err
	}
	items := make([]public.PoolCluster, len(list))
	for i, c := range list {
		items[i] = s.presentPoolCluster(c)
	}
	writeJSON(w, http.StatusOK, public.PoolClusterList{Kind: public.PoolClusterListKindPoolClusterList, Page: q.Page, Size: len(items),
		Total: total, Items: items})
	return nil
}

func (s *Server) presentPoolCluster(c fleet.PoolCluster) public.PoolCluster {
	out := public.PoolCluster{Kind: public.PoolClusterKindPoolCluster, Id: c.ID, Href: s.cfg.BasePath + "/clusters/" + c.ID, PoolId: c.PoolID,
		Name: c.Name, State: public.PoolClusterState(c.State), BlueprintVersion: c.BlueprintVersion, CapacityUnits: c.CapacityUnits,
		ReservedUnits: c.ReservedUnits, FreeUnits: c.FreeUnits(), HoldableUnits: c.HoldableUnits, ApiUrl: strPtr(c.APIURL),
		ConsoleUrl: strPtr(c.ConsoleURL), CreatedAt: c.CreatedAt, ScaledAt: c.ScaledAt}
	capacity, allocatable := public.StringMap(c.Capacity), public.StringMap(c.Allocatable)
	out.Capacity, out.Allocatable = &capacity, &allocatable
	if c.Hub != nil {
		h := hubRef(*c.Hub)
		out.Hub = &h
	}
	addOns := make([]struct {
		Applied   public.PoolClusterAddOnsApplied   `json:"applied"`
		Available public.PoolClusterAddOnsAvailable `json:"available"`
		Message   string                            `json:"message"`
		Name      string                            `json:"name"`
		Reason    string                            `json:"reason"`
	}, len(c.AddOns))
	for i, a := range c.AddOns {
		addOns[i].Applied, addOns[i].Message, addOns[i].Name, addOns[i].Reason = public.PoolClusterAddOnsApplied(a.Applied), a.Message, a.Name, a.Reason
		addOns[i].Available = public.PoolClusterAddOnsAvailable(a.Available)
	}
	out.AddOns = &addOns
	for _, name := range slices.Sorted(maps.Keys(c.Replicas)) {
		mp := struct {
			Name     string `json:"name"`
			Nodes    *int   `json:"nodes,omitempty"`
			Replicas int    `json:"replicas"`
		}{Name: name, Replicas: c.Replicas[name]}
		if n, ok := c.Nodes[name]; ok {
			mp.Nodes = &n
		}
		out.MachinePools = append(out.MachinePools, mp)
	}
	return out
}

func (s *Server) handlePoolEventList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.Pools.ListPoolEvents(r.Context(), caller(r).OrgID, pathParam(r, "id"), q)
	if err != nil {
		return err
	}
	items := make([]public.PoolEvent, len(list))
	for i, e := range list {
		items[i] = public.PoolEvent{Kind: public.PoolEventKindPoolEvent, Id: strconv.FormatInt(e.ID, 10), Type: e.Type, Reason: e.Reason,
			Message: e.Message, ClusterId: strPtr(e.ClusterID), At: e.At}
	}
	writeJSON(w, http.StatusOK, public.PoolEventList{Kind: public.PoolEventListKindPoolEventList, Page: q.Page, Size: len(items),
		Total: total, Items: items})
	return nil
}

func (s *Server) handleReservationCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.ReservationCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	v, err := s.services.Pools.CreateReservation(r.Context(), caller(r), pathParam(r, "id"),
		fleet.ReservationCreate{Units: body.Units, InstanceID: deref(body.InstanceId)})
	if err != nil {
		return err
	}
	out := s.presentReservation(v)
	w.Header().Set("Location", out.Href)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) handleReservationList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.Pools.ListReservations(r.Context(), caller(r).OrgID, pathParam(r, "id"), q)
	if err != nil {
		return err
	}
	items := make([]public.Reservation, len(list))
	for i, v := range list {
		items[i] = s.presentReservation(v)
	}
	writeJSON(w, http.StatusOK, public.ReservationList{Kind: public.ReservationListKindReservationList, Page: q.Page, Size: len(items),
		Total: total, Items: items})
	return nil
}

func (s *Server) handleReservationGet(w http.ResponseWriter, r *http.Request) error {
	v, err := s.services.Pools.FindReservation(r.Context(), caller(r).OrgID, pathParam(r, "id"), pathParam(r, "reservation_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.presentReservation(v))
	return nil
}

func (s *Server) handleReservationDelete(w http.ResponseWriter, r *http.Request) error {
	err := s.services.Pools.DeleteReservation(r.Context(), s.permit(r, fleet.ActionReservationsDelete), caller(r).OrgID, pathParam(r, "id"),
		pathParam(r, "reservation_id"))
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) presentReservation(v fleet.Reservation) public.Reservation {
	return public.Reservation{Kind: public.ReservationKindReservation, Id: v.ID,
		Href: s.cfg.BasePath + "/capacity_pools/" + v.PoolID + "/reservations/" + v.ID, PoolId: v.PoolID, ClusterId: v.ClusterID,
		Units: v.Units, InstanceId: strPtr(v.InstanceID), CreatedBy: strPtr(v.Owner), CreatedAt: v.CreatedAt}
}
