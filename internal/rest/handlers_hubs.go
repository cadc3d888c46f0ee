package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// handleHubCreate registers a hub.
func (s *Server) handleHubCreate(w http.ResponseWriter, r *http.Request) error {
	var body admin.HubCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	hub, err := s.services.Hubs.CreateHub(r.Context(), fleet.HubCreate{
		Name: body.Name, Zone: body.Zone, Region: body.Region, CloudProvider: deref(body.CloudProvider),
		DeliveryMode: fleet.DeliveryMode(body.DeliveryMode), Capacity: body.Capacity,
		AgentIdentity: deref(body.AgentIdentity), OwnerOrgID: deref(body.OwnerOrgId), Credentials: derefCredentials(body.Credentials),
		OCM: ocmTarget(body.Ocm), Hive: hiveTarget(body.Hive),
	})
	if err != nil {
		return err
	}
	return s.writeHub(w, http.StatusCreated, hub)
}

// handleHubList serves a page of hubs.
func (s *Server) handleHubList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	hubs, total, err := s.services.Hubs.ListHubs(r.Context(), q)
	if err != nil {
		return err
	}
	items := make([]admin.Hub, len(hubs))
	for i, h := range hubs {
		items[i] = s.presentHub(h)
	}
	writeJSON(w, http.StatusOK, admin.HubList{Kind: admin.HubListKindHubList, Page: q.Page, Size: len(items), Total: total, Items: items})
	return nil
}

// handleHubGet serves one hub.
func (s *Server) handleHubGet(w http.ResponseWriter, r *http.Request) error {
	hub, err := s.services.Hubs.FindHub(r.Context(), pathParam(r, "id"))
	if err != nil {
		return err
	}
	return s.writeHub(w, http.StatusOK, hub)
}

// handleHubUpdate changes a hub under If-Match.
func (s *Server) handleHubUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body admin.HubPatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	update := fleet.HubUpdate{Region: body.Region, CloudProvider: body.CloudProvider, Capacity: body.Capacity,
		AgentIdentity: body.AgentIdentity, OwnerOrgID: body.OwnerOrgId, OCM: ocmTarget(body.Ocm), Hive: hiveTarget(body.Hive)}
	if body.DeliveryMode != nil {
		mode := fleet.DeliveryMode(*body.DeliveryMode)
		update.DeliveryMode = &mode
	}
	if body.Credentials != nil {
		creds := derefCredentials(body.Credentials)
		update.Credentials = &creds
	}
	hub, err := s.services.Hubs.UpdateHub(r.Context(), pathParam(r, "id"), match, update)
	if err != nil {
		return err
	}
	return s.writeHub(w, http.StatusOK, hub)
}

// handleHubCordon stops or resumes new placements on a hub.
func (s *Server) handleHubCordon(cordoned bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		hub, err := s.services.Hubs.SetHubCordoned(r.Context(), pathParam(r, "id"), cordoned)
		if err != nil {
			return err
		}
		return s.writeHub(w, http.StatusOK, hub)
	}
}

// handleHubDelete removes a hub that holds no registrations.
func (s *Server) handleHubDelete(w http.ResponseWriter, r *http.Request) error {
	if err := s.services.Hubs.DeleteHub(r.Context(), pathParam(r, "id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) writeHub(w http.ResponseWriter, status int, hub fleet.Hub) error {
	w.Header().Set("ETag", fleet.ETag(hub.Generation))
	writeJSON(w, status, s.presentHub(hub))
	return nil
}

// presentHub renders a hub for the admin API; its credentials never leave.
func (s *Server) presentHub(h fleet.Hub) admin.Hub {
	out := admin.Hub{
		Kind: admin.HubKindHub, Id: h.ID, Href: s.cfg.BasePath + "/admin/hubs/" + h.ID, Name: h.Name, Zone: h.Zone,
		Region: h.Region, CloudProvider: h.CloudProvider, DeliveryMode: admin.DeliveryMode(h.DeliveryMode),
		Capacity: h.Capacity, AgentIdentity: strPtr(h.AgentIdentity), OwnerOrgId: strPtr(h.OwnerOrgID),
		Cordoned: h.Cordoned, HasCredentials: h.HasCredentials, PlacedCount: h.PlacedCount, Revision: h.Revision,
		AppliedRevision: h.AppliedRevision, Conditions: make([]admin.Condition, len(h.Conditions)),
		LastHeartbeatAt: h.LastHeartbeatAt, AgentVersion: strPtr(h.AgentVersion), Generation: h.Generation,
		ResyncRequested: &h.ResyncRequested, InventoryStale: &h.InventoryStale, LastInventoryAt: h.LastInventoryAt,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt,
	}
	if len(h.AgentCapacity) > 0 {
		out.AgentCapacity = &h.AgentCapacity
	}
	if h.OCM != nil {
		out.Ocm = &admin.OCMTarget{ClusterId: h.OCM.ClusterID, ApiUrl: h.OCM.APIURL, TokenUrl: strPtr(h.OCM.TokenURL)}
	}
	if h.Hive != nil {
		out.Hive = &admin.HiveTarget{ClusterDeploymentNamespace: h.Hive.Namespace, ClusterDeploymentName: h.Hive.ClusterDeployment}
	}
	for i, c := range h.Conditions {
		out.Conditions[i] = admin.Condition{Type: c.Type, Status: admin.ConditionStatus(c.Status), Reason: c.Reason,
			Message: strPtr(c.Message), ObservedGeneration: c.ObservedGeneration, LastTransitionTime: c.LastTransitionTime}
	}
	return out
}

func derefCredentials(c *admin.Credentials) map[string]string {
	if c == nil {
		return nil
	}
	return map[string]string(*c)
}

func ocmTarget(t *admin.OCMTarget) *fleet.OCMTarget {
	if t == nil {
		return nil
	}
	return &fleet.OCMTarget{ClusterID: t.ClusterId, APIURL: t.ApiUrl, TokenURL: deref(t.TokenUrl)}
}

func hiveTarget(t *admin.HiveTarget) *fleet.HiveTarget {
	if t == nil {
		return nil
	}
	return &fleet.HiveTarget{Namespace: t.ClusterDeploymentNamespace, ClusterDeployment: t.ClusterDeploymentName}
}
