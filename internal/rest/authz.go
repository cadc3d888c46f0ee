package rest

import (
	"context"
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// subject returns the request's subject, as authenticate put it in the
// context; a request without a token is anonymous.
func (s *Server) subject(r *http.Request) fleet.Subject {
	if sub, ok := fleet.SubjectOf(r.Context()); ok {
		return sub
	}
	return s.roles.Subject(fleet.Identity{}, false)
}

// authorize asks the one decision point whether the request's subject may do
// action on res; a resource that names no org is the subject's own (lists,
// creates, and reads scoped to the caller's organisation).
func (s *Server) authorize(r *http.Request, action string, res fleet.AuthzResource) error {
	sub := s.subject(r)
	if res.OrgID == "" {
		res.OrgID = sub.OrgID
	}
	return s.services.Authorizer.Authorize(r.Context(), fleet.AuthzRequest{Subject: sub, Action: action, Resource: res})
}

// permit is the request's fleet.Permit for action: the store's write asks
// it with the row it locked, so that the decision sees the row the write
// changes (fleet.Permit).
func (s *Server) permit(r *http.Request, action string) fleet.Permit {
	sub := s.subject(r)
	return func(ctx context.Context, res fleet.AuthzResource) error {
		return s.services.Authorizer.Authorize(ctx, fleet.AuthzRequest{Subject: sub, Action: action, Resource: res})
	}
}

// can lets through requests whose subject may do action on the resource of
// kind named by the path's id parameter (hub_id for the agents' API), if any.
func (s *Server) can(action, kind string, next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := pathParam(r, "id")
		if id == "" {
			id = pathParam(r, "hub_id")
		}
		if err := s.authorize(r, action, fleet.AuthzResource{Kind: kind, ID: id}); err != nil {
			return err
		}
		return next(w, r)
	}
}
