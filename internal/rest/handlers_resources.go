package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// handleHubResourceKindsGet tells the hub's agent which kinds to sync.
func (s *Server) handleHubResourceKindsGet(w http.ResponseWriter, r *http.Request) error {
	kinds, err := s.services.Resources.ListAgentKinds(r.Context(), pathParam(r, "hub_id"), caller(r).AgentID)
	if err != nil {
		return err
	}
	out := private.ResourceKindList{Kind: private.ResourceKindListKindResourceKindList, Items: make([]private.ResourceKind, len(kinds))}
	for i, k := range kinds {
		out.Items[i] = private.ResourceKind{Group: k.Group, Version: k.Version, Kind: k.Kind, Resource: k.Resource, Namespaced: k.Namespaced}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleHubResourcesPost stores a batch of the hub's objects of one kind.
func (s *Server) handleHubResourcesPost(w http.ResponseWriter, r *http.Request) error {
	var body private.ResourceBatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	batch := fleet.ResourceBatch{Group: body.Group, Kind: body.Kind, Generation: body.Generation, Full: body.Full, Last: body.Last,
		Deletes: body.Deletes, Upserts: make([]fleet.ResourceObject, len(body.Upserts))}
	for i, u := range body.Upserts {
		batch.Upserts[i] = agentapi.Object(u)
	}
	if body.Present != nil {
		for _, p := range *body.Present {
			batch.Present = append(batch.Present, fleet.PresentCluster{Name: p.Key, ContentHash: p.ContentHash})
		}
	}
	res, err := s.services.Resources.IngestResources(r.Context(), pathParam(r, "hub_id"), caller(r).AgentID, batch)
	if err != nil {
		return err
	}
	writeInventoryAck(w, res)
	return nil
}

// handleResourceList serves a page of one synced kind's objects to administrators.
func (s *Server) handleResourceList(w http.ResponseWriter, r *http.Request) error {
	params := r.URL.Query()
	kind, ok := fleet.FindResourceKind(params.Get("kind"))
	if !ok {
		return fleet.Errorf(fleet.CodeValidation, "query parameter kind must name a synced kind")
	}
	q := fleet.ResourceQuery{Kind: kind, HubID: params.Get("hub_id"), Namespace: params.Get("namespace"), ListQuery: listQuery(r)}
	// Read before the list, so the list shows every change up to the cursor.
	cursor, err := s.services.Resources.ResourceCursor(r.Context())
	if err != nil {
		return err
	}
	resources, total, err := s.services.Resources.ListResources(r.Context(), q)
	if err != nil {
		return err
	}
	items := make([]admin.Resource, len(resources))
	for i, x := range resources {
		items[i] = s.presentResource(x)
	}
	writeJSON(w, http.StatusOK, admin.ResourceList{Kind: admin.ResourceListKindResourceList, Page: q.Page, Size: len(items),
		Total: total, Items: items, Cursor: &cursor})
	return nil
}

// handleResourceGet serves one synced object, at the href its list shows.
func (s *Server) handleResourceGet(w http.ResponseWriter, r *http.Request) error {
	x, err := s.services.Resources.FindResource(r.Context(), pathParam(r, "id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.presentResource(x))
	return nil
}

// presentResource is an object as the admin API shows it.
func (s *Server) presentResource(x fleet.Resource) admin.Resource {
	return admin.Resource{Kind: admin.ResourceKindResource, Id: x.ID, Href: s.cfg.BasePath + "/admin/resources/" + x.ID, HubId: x.Hub.ID, HubName: x.Hub.Name, Zone: x.Zone,
		ApiGroup: x.Group, Version: x.Version, ObjectKind: x.Kind, Namespace: x.Namespace, Name: x.Name,
		ClusterName: strPtr(x.ClusterName), Uid: x.UID, ResourceVersion: x.ResourceVersion, Generation: x.Generation,
		Labels: orEmptyMap(x.Labels), Body: x.Body, ContentHash: x.ContentHash, CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
}
