package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/agentapi"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// handleHubInventoryPost stores a batch of the hub's ManagedCluster summaries.
func (s *Server) handleHubInventoryPost(w http.ResponseWriter, r *http.Request) error {
	var body private.InventoryBatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	batch := fleet.InventoryBatch{Generation: body.Generation, Full: body.Full, Last: body.Last, Deletes: body.Deletes,
		Upserts: make([]fleet.ManagedClusterSummary, len(body.Upserts))}
	for i, u := range body.Upserts {
		batch.Upserts[i] = agentapi.Summary(u)
	}
	if body.Present != nil {
		for _, p := range *body.Present {
			batch.Present = append(batch.Present, fleet.PresentCluster{Name: p.Name, ContentHash: p.ContentHash})
		}
	}
	res, err := s.services.Inventory.IngestInventory(r.Context(), pathParam(r, "hub_id"), caller(r).AgentID, batch)
	if err != nil {
		return err
	}
	writeInventoryAck(w, res)
	return nil
}

// writeInventoryAck answers an inventory or resource batch with what it did.
func writeInventoryAck(w http.ResponseWriter, res fleet.InventoryResult) {
	if res.Resend == nil {
		res.Resend = []string{}
	}
	writeJSON(w, http.StatusOK, private.InventoryAck{Kind: private.InventoryAckKindInventoryAck, Written: res.Written,
		Unchanged: res.Unchanged, Deleted: res.Deleted, Tombstoned: res.Tombstoned, Confirmed: res.Confirmed,
		Resend: res.Resend, ContentHashes: res.ContentHashes})
}

func derefStrings(m *map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return *m
}

// handleRegistrationsStatusPut stores the hub's view of its registrations.
func (s *Server) handleRegistrationsStatusPut(w http.ResponseWriter, r *http.Request) error {
	var body private.RegistrationStatusBatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	items := make([]fleet.RegistrationHubStatus, len(body.Items))
	for i, it := range body.Items {
		items[i] = fleet.RegistrationHubStatus{RegistrationID: it.RegistrationId}
		for _, c := range it.Conditions {
			items[i].Conditions = append(items[i].Conditions, fleet.Condition{Type: c.Type, Status: fleet.ConditionStatus(c.Status),
				Reason: c.Reason, Message: deref(c.Message), LastTransitionTime: c.LastTransitionTime})
		}
		if it.Import != nil {
			items[i].ImportManifests = &it.Import.Manifests
		}
	}
	n, err := s.services.Agents.RecordRegistrationStatus(r.Context(), pathParam(r, "hub_id"), caller(r).AgentID, items)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, private.RegistrationStatusAck{Kind: private.RegistrationStatusAckKindRegistrationStatusAck, Updated: n})
	return nil
}

// handleClusterImportGet serves the import manifests to the registration's org only.
func (s *Server) handleClusterImportGet(w http.ResponseWriter, r *http.Request) error {
	id := pathParam(r, "id")
	manifests, err := s.services.Registrations.FindImportMaterial(r.Context(), s.permit(r, fleet.ActionClustersImport), caller(r).OrgID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, public.ClusterImport{Kind: public.ClusterImportKindClusterImport, Id: id, Href: s.cfg.BasePath + "/clusters/" + id + "/import",
		ClusterId: id, Manifests: manifests})
	return nil
}

// handleManagedClusterList serves the inventory the caller may see.
func (s *Server) handleManagedClusterList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	id := caller(r)
	admin := s.subject(r).FleetViewer
	page, err := s.services.Inventory.ListManagedClusters(r.Context(), id, admin, q)
	if err != nil {
		return err
	}
	items := make([]managedClusterJSON, len(page.Items))
	for i, c := range page.Items {
		items[i] = s.presentManagedCluster(c)
	}
	return s.writeAppendedJSON(w, http.StatusOK, managedClusterListJSON{list: public.ManagedClusterList{
		Kind: public.ManagedClusterListKindManagedClusterList, Page: q.Page, Size: len(items), Total: page.Total, Cursor: &page.Cursor},
		items: items})
}

// handleManagedClusterGet serves one cluster of the inventory the caller may see.
func (s *Server) handleManagedClusterGet(w http.ResponseWriter, r *http.Request) error {
	id := caller(r)
	cluster, err := s.services.Inventory.GetManagedCluster(r.Context(), id, s.subject(r).FleetViewer, pathParam(r, "id"))
	if err != nil {
		return err
	}
	return s.writeAppendedJSON(w, http.StatusOK, s.presentManagedCluster(cluster))
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
