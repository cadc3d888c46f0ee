package rest

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// handleHubDesiredGet is the agents' long-poll: it answers at once when the
// hub's revision is past `after`, else when it moves (woken through
// pg_notify on whichever replica holds the request), else 304 at `wait`.
func (s *Server) handleHubDesiredGet(w http.ResponseWriter, r *http.Request) error {
	hubID, agent := pathParam(r, "hub_id"), caller(r).AgentID
	// Without `after` the agent has nothing yet: it gets the set at once.
	after := int64(-1)
	if v := r.URL.Query().Get("after"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	wait := s.cfg.AgentDefaultWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fleet.Errorf(fleet.CodeValidation, "wait %q is not a duration", v)
		}
		wait = min(d, s.cfg.AgentMaxWait)
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for {
		// Subscribe before reading, so a change between the two is not missed.
		woken, stop := s.services.Revisions.WaitRevision(hubID)
		hub, err := s.services.Agents.FindAgentHub(r.Context(), hubID, agent)
		if err != nil {
			stop()
			return err
		}
		if hub.Revision > after {
			stop()
			return s.writeDesired(w, r, hubID, agent)
		}
		select {
		case <-woken:
		case <-s.draining:
			// Shutting down: the agent polls again, on another replica.
			stop()
			w.WriteHeader(http.StatusNotModified)
			return nil
		case <-ctx.Done():
			stop()
			if r.Context().Err() != nil {
				return nil // the agent went away
			}
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
	}
}

func (s *Server) writeDesired(w http.ResponseWriter, r *http.Request, hubID, agent string) error {
	set, err := s.services.Inventory.DesiredSet(r.Context(), hubID, agent)
	if err != nil {
		return err
	}
	body := private.DesiredSet{Kind: private.DesiredSetKindDesiredSet, HubId: set.HubID, Revision: set.Revision,
		Registrations: make([]private.DesiredRegistration, len(set.Registrations))}
	for i, reg := range set.Registrations {
		body.Registrations[i] = private.DesiredRegistration{RegistrationId: reg.RegistrationID, Generation: reg.Generation,
			ManagedClusterName: reg.ManagedClusterName, Objects: kubeObjects(reg.Objects)}
	}
	policies := make([]private.DesiredPolicy, len(set.Policies))
	for i, p := range set.Policies {
		policies[i] = private.DesiredPolicy{PolicyId: p.PolicyID, Generation: p.Generation, Objects: kubeObjects(p.Objects)}
	}
	body.Policies = &policies
	writeJSON(w, http.StatusOK, body)
	return nil
}

// kubeObjects carries rendered objects through the generated type.
func kubeObjects(objects []map[string]any) []private.KubeObject {
	out := make([]private.KubeObject, len(objects))
	for i, o := range objects {
		out[i] = kubeObject(o)
	}
	return out
}

// kubeObject carries a rendered object through the generated type.
func kubeObject(o map[string]any) private.KubeObject {
	ko := private.KubeObject{AdditionalProperties: map[string]interface{}{}}
	for k, v := range o {
		switch k {
		case "apiVersion":
			ko.ApiVersion, _ = v.(string)
		case "kind":
			ko.Kind, _ = v.(string)
		case "metadata":
			ko.Metadata, _ = v.(map[string]any)
		default:
			ko.AdditionalProperties[k] = v
		}
	}
	return ko
}
