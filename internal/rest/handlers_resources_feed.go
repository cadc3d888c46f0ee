package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// handleResourceChangeList is the change feed of one synced kind, for
// administrators: GET /admin/resources/changes, long-polled as the
// clusters' feed (followFeed).
func (s *Server) handleResourceChangeList(w http.ResponseWriter, r *http.Request) error {
	params := r.URL.Query()
	kind, ok := fleet.FindResourceKind(params.Get("kind"))
	if !ok {
		return fleet.Errorf(fleet.CodeValidation, "query parameter kind must name a synced kind")
	}
	p, err := s.feedParams(r)
	if err != nil {
		return err
	}
	hubID := params.Get("hub_id")
	return followFeed(s, w, r, p, func(after string) (fleet.ResourceChangePage, feedStatus, error) {
		page, err := s.services.Resources.ListResourceChanges(r.Context(), kind, hubID, after, p.size)
		return page, feedStatus{items: len(page.Items), cursor: page.Cursor, pending: page.Pending}, err
	}, s.writeResourceChanges)
}

func (s *Server) writeResourceChanges(w http.ResponseWriter, page fleet.ResourceChangePage) error {
	items := make([]admin.ResourceChange, len(page.Items))
	for i, c := range page.Items {
		items[i] = admin.ResourceChange{Resource: s.presentResource(c.Resource), DeletedAt: c.DeletedAt}
	}
	writeJSON(w, http.StatusOK, admin.ResourceChangeList{Kind: admin.ResourceChangeListKindResourceChangeList,
		Size: len(items), Cursor: page.Cursor, Items: items})
	return nil
}
