package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// handleClusterCreate registers a cluster for the caller's organisation.
func (s *Server) handleClusterCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.ClusterCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	reg, created, err := s.services.Registrations.CreateRegistration(r.Context(), caller(r), registrationCreate(body), r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	if !created {
		w.Header().Set("Idempotency-Replayed", "true")
	}
	cluster := s.presentCluster(reg)
	w.Header().Set("Location", cluster.Href)
	w.Header().Set("ETag", fleet.ETag(reg.Generation))
	writeJSON(w, http.StatusAccepted, cluster)
	return nil
}

// handleClusterList serves a page of the caller's organisation's clusters.
func (s *Server) handleClusterList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	regs, total, err := s.services.Registrations.ListRegistrations(r.Context(), caller(r).OrgID, q)
	if err != nil {
		return err
	}
	items := make([]clusterJSON, len(regs))
	for i, reg := range regs {
		items[i] = clusterJSON(s.presentCluster(reg))
	}
	return s.writeAppendedJSON(w, http.StatusOK, clusterListJSON{
		list:  public.ClusterList{Kind: public.ClusterListKindClusterList, Page: q.Page, Size: len(items), Total: total},
		items: items,
	})
}

// handleClusterGet serves one of the caller's organisation's clusters.
func (s *Server) handleClusterGet(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.services.Registrations.FindRegistration(r.Context(), caller(r).OrgID, pathParam(r, "id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(reg.Generation))
	return s.writeAppendedJSON(w, http.StatusOK, clusterJSON(s.presentCluster(reg)))
}

// handleClusterUpdate changes labels or display name under If-Match.
func (s *Server) handleClusterUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body public.ClusterPatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	update := fleet.RegistrationUpdate{DisplayName: body.DisplayName}
	if body.Labels != nil {
		labels := map[string]string(*body.Labels)
		update.Labels = &labels
	}
	reg, err := s.services.Registrations.UpdateRegistration(r.Context(), s.permit(r, fleet.ActionClustersUpdate), caller(r).OrgID, pathParam(r, "id"), match, update)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(reg.Generation))
	writeJSON(w, http.StatusOK, s.presentCluster(reg))
	return nil
}

// handleClusterDelete starts deregistration.
func (s *Server) handleClusterDelete(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.services.Registrations.RequestRegistrationDeletion(r.Context(), s.permit(r, fleet.ActionClustersDelete), caller(r).OrgID, pathParam(r, "id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, s.presentCluster(reg))
	return nil
}

// presentConditions renders conditions for the public API.
func presentConditions(cs fleet.Conditions) []public.Condition {
	out := make([]public.Condition, len(cs))
	for i, cond := range cs {
		out[i] = public.Condition{Type: cond.Type, Status: public.ConditionStatus(cond.Status), Reason: cond.Reason,
			Message: strPtr(cond.Message), ObservedGeneration: cond.ObservedGeneration, LastTransitionTime: cond.LastTransitionTime}
	}
	return out
}

// presentCluster renders a registration for the public API; secrets are
// never part of it, only whether they exist.
func (s *Server) presentCluster(reg fleet.Registration) public.Cluster {
	c := public.Cluster{
		Kind: public.ClusterKindCluster, Id: reg.ID, Href: s.cfg.BasePath + "/clusters/" + reg.ID,
		Name: reg.Name, DisplayName: reg.DisplayName, Labels: reg.Labels, Zone: reg.Zone, Region: reg.Region,
		Product: public.Product(reg.Product), HasCredentials: reg.HasCredentials, Phase: public.ClusterPhase(reg.Phase),
		Conditions: presentConditions(reg.Conditions), Generation: reg.Generation,
		ObservedGeneration: reg.ObservedGeneration, CreatedAt: reg.CreatedAt, UpdatedAt: reg.UpdatedAt,
		DeletionRequestedAt: reg.DeletionRequestedAt, CreatedBy: strPtr(reg.Owner),
	}
	if reg.Hub != nil {
		c.Hub = &public.HubRef{Id: reg.Hub.ID, Name: reg.Hub.Name, Zone: reg.Hub.Zone, Region: reg.Hub.Region}
	}
	return c
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
