package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// handleHubStatusPut records a hub agent's heartbeat. The token's agent
// identity must be the hub's; any other hub is not found.
func (s *Server) handleHubStatusPut(w http.ResponseWriter, r *http.Request) error {
	var body private.HubStatusReport
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	hb := fleet.HubHeartbeat{AgentVersion: body.AgentVersion, AgentStartGeneration: body.AgentStartGeneration,
		AppliedRevision: body.AppliedRevision, Capacity: derefStrings(body.Capacity)}
	if body.Conditions != nil {
		for _, c := range *body.Conditions {
			hb.Conditions = append(hb.Conditions, fleet.Condition{Type: c.Type, Status: fleet.ConditionStatus(c.Status),
				Reason: c.Reason, Message: deref(c.Message), ObservedGeneration: c.ObservedGeneration, LastTransitionTime: c.LastTransitionTime})
		}
	}
	if body.Failures != nil {
		hb.FailuresReported = true
		for _, f := range *body.Failures {
			id, pid := deref(f.RegistrationId), deref(f.PolicyId)
			if (id == "") == (pid == "") {
				return fleet.Errorf(fleet.CodeValidation, "failures: each names exactly one of registration_id and policy_id")
			}
			hb.Failures = append(hb.Failures, fleet.DeliveryFailure{RegistrationID: id, PolicyID: pid, Reason: f.Reason, Message: f.Message})
		}
	}
	hub, err := s.services.Agents.RecordHubHeartbeat(r.Context(), pathParam(r, "hub_id"), caller(r).AgentID, hb)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, private.HubStatusAck{Kind: private.HubStatusAckKindHubStatusAck, HubId: hub.ID,
		Revision: hub.Revision, AppliedRevision: hub.AppliedRevision, RevisionHistory: strPtr(hub.RevisionHistory),
		ResyncRequested: hub.ResyncRequested})
	return nil
}
