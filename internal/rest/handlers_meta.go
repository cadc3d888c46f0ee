package rest

import (
	"net/http"
	"strconv"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// handleOpenAPIGet serves the public specification with this deployment's base path.
func (s *Server) handleOpenAPIGet(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(s.public.json)
	return err
}

// handleErrorList serves a page of the error catalogue.
func (s *Server) handleErrorList(w http.ResponseWriter, r *http.Request) error {
	page, size := pageParams(r)
	if page < 1 || page > fleet.MaxPage || size < 1 {
		return fleet.Errorf(fleet.CodeValidation, "page must be between 1 and %d and size at least 1", fleet.MaxPage)
	}
	catalogue := fleet.Catalogue()
	items := []public.Error{}
	start := (page - 1) * size
	for i := start; i < len(catalogue) && i < start+size; i++ {
		items = append(items, s.errorBody(catalogue[i], catalogue[i].Reason, ""))
	}
	writeJSON(w, http.StatusOK, public.ErrorList{
		Kind: public.ErrorListKindErrorList, Page: page, Size: len(items), Total: len(catalogue), Items: items,
	})
	return nil
}

// handleErrorGet serves one entry of the error catalogue.
func (s *Server) handleErrorGet(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.Atoi(pathParam(r, "id"))
	if err != nil {
		return fleet.Errorf(fleet.CodeValidation, "error id must be a number")
	}
	entry, ok := fleet.LookupErrorCode(fleet.ErrorCode(id))
	if !ok {
		return fleet.Errorf(fleet.CodeNotFound, "no error with id %d", id)
	}
	writeJSON(w, http.StatusOK, s.errorBody(entry, entry.Reason, ""))
	return nil
}
