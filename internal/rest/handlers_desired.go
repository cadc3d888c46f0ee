package rest

import (
	"context"
	"encoding/json"
	"fmt"
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
	// With `since`, the agent holds that revision's whole set and takes the
	// changes after it (ADR 0017).
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		since, _ = strconv.ParseInt(v, 10, 64)
	}
	wait := s.cfg.AgentDefaultWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fleet.Errorf(fleet.CodeValidation, "query parameter wait must be a duration such as 30s")
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
			return s.writeDesired(w, r, hubID, agent, since)
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

// writeDesired reads and writes the hub's desired set, in one of the
// AgentDesiredConcurrency slots: an agent whose revision moved waits for one,
// holding no database connection, until its request ends.
func (s *Server) writeDesired(w http.ResponseWriter, r *http.Request, hubID, agent string, since int64) error {
	select {
	case s.desired <- struct{}{}:
		defer func() { <-s.desired }()
	case <-r.Context().Done():
		return fleet.Errorf(fleet.CodeUnavailable, "the request ended while waiting for a desired-set slot")
	}
	// Without since (0), DesiredChanges answers the whole set.
	set, err := s.services.Agents.DesiredChanges(r.Context(), hubID, agent, since)
	if err != nil {
		return err
	}
	body := private.DesiredSet{Kind: private.DesiredSetKindDesiredSet, HubId: set.HubID, Revision: set.Revision,
		RevisionHistory: strPtr(set.RevisionHistory), Registrations: make([]private.DesiredRegistration, len(set.Registrations))}
	if set.BaseRevision > 0 {
		removed := set.Removed
		if removed == nil {
			removed = []string{}
		}
		body.BaseRevision, body.RemovedRegistrations = &set.BaseRevision, &removed
	}
	for i, reg := range set.Registrations {
		objects, failure := desiredObjects(reg.Objects, reg.Failure)
		body.Registrations[i] = private.DesiredRegistration{RegistrationId: reg.RegistrationID, Generation: reg.Generation,
			ManagedClusterName: reg.ManagedClusterName, Objects: objects, Failure: failure}
	}
	policies := make([]private.DesiredPolicy, len(set.Policies))
	for i, p := range set.Policies {
		objects, failure := desiredObjects(p.Objects, p.Failure)
		policies[i] = private.DesiredPolicy{PolicyId: p.PolicyID, Generation: p.Generation, Objects: objects, Failure: failure}
	}
	body.Policies = &policies
	writeJSON(w, http.StatusOK, body)
	return nil
}

// desiredObjects encodes one entry's objects, each on its own. An entry
// the store could not render, or whose objects do not encode or nest deeper
// than fleet.MaxDeliveredDepth, goes without objects and with its failure:
// it fails on its own, and the set stays decodable for the agent.
func desiredObjects(objects []map[string]any, failure *fleet.DeliveryFailure) ([]json.RawMessage, *private.EntryFailure) {
	out := make([]json.RawMessage, 0, len(objects))
	for _, o := range objects {
		if failure != nil {
			break
		}
		b, err := json.Marshal(o)
		switch {
		case err != nil:
			failure = &fleet.DeliveryFailure{Reason: fleet.ReasonObjectUnreadable, Message: "the fleet manager cannot encode the entry's objects"}
		case fleet.JSONDepth(b) > fleet.MaxDeliveredDepth:
			failure = &fleet.DeliveryFailure{Reason: fleet.ReasonObjectTooDeep,
				Message: fmt.Sprintf("an object is nested more than the %d levels a hub object may have", fleet.MaxDeliveredDepth)}
		default:
			out = append(out, b)
		}
	}
	if failure == nil {
		return out, nil
	}
	return []json.RawMessage{}, &private.EntryFailure{Reason: failure.Reason, Message: failure.Message}
}
