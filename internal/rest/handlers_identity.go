package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// handleCurrentUserGet echoes what the service read from the caller's token.
func (s *Server) handleCurrentUserGet(w http.ResponseWriter, r *http.Request) error {
	id, ok := fleet.IdentityFromContext(r.Context())
	if !ok {
		return fleet.Errorf(fleet.CodeUnauthenticated, "a bearer token is required")
	}
	roles := id.Roles
	if roles == nil {
		roles = []string{}
	}
	body := public.CurrentUser{
		Kind:     public.CurrentUserKindCurrentUser,
		OrgId:    id.OrgID,
		Username: id.Username,
		Roles:    roles,
	}
	if id.AgentID != "" {
		body.AgentId = &id.AgentID
	}
	if id.Issuer != "" {
		body.Issuer = &id.Issuer
	}
	if id.Subject != "" {
		body.Subject = &id.Subject
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
