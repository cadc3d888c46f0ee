package rest

import (
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/version"
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

// handleAPIVersionGet answers this version's metadata and links to its
// collections, as OCM services do at their base path.
func (s *Server) handleAPIVersionGet(w http.ResponseWriter, _ *http.Request) error {
	v := s.apiVersion()
	v.Collections = &s.collections
	writeJSON(w, http.StatusOK, v)
	return nil
}

// apiMetadata is what the path above the base path answers: the API and its
// versions (OCM's API metadata). The spec describes it in getAPIVersion; it
// is no path of the spec, which is relative to the base path.
type apiMetadata struct {
	Kind     string              `json:"kind"`
	ID       string              `json:"id"`
	Href     string              `json:"href"`
	Versions []public.APIVersion `json:"versions"`
}

// handleAPIMetadataGet answers the API's versions at the path above the base path.
func (s *Server) handleAPIMetadataGet(w http.ResponseWriter, _ *http.Request) error {
	parent := path.Dir(s.cfg.BasePath)
	writeJSON(w, http.StatusOK, apiMetadata{Kind: "API", ID: path.Base(parent), Href: parent,
		Versions: []public.APIVersion{s.apiVersion()}})
	return nil
}

// apiVersion is this version's metadata without its collections.
func (s *Server) apiVersion() public.APIVersion {
	return public.APIVersion{Kind: public.APIVersionKindAPIVersion, Id: path.Base(s.cfg.BasePath), Href: s.cfg.BasePath,
		ServerVersion: &version.Version}
}

// apiCollections links the public spec's top-level collections: each path of
// one segment whose GET answers a list (a schema named ...List).
func apiCollections(sp *spec, basePath string) []public.APILink {
	links := []public.APILink{}
	for _, p := range sp.doc.Paths.InMatchingOrder() {
		get := sp.doc.Paths.Value(p).Get
		if get == nil || strings.Count(p, "/") != 1 || strings.Contains(p, "{") || strings.Contains(p, ":") {
			continue
		}
		ok := get.Responses.Status(http.StatusOK)
		if ok == nil || ok.Value == nil || ok.Value.Content.Get("application/json") == nil {
			continue
		}
		ref := ok.Value.Content.Get("application/json").Schema.Ref
		kind := ref[strings.LastIndex(ref, "/")+1:]
		if !strings.HasSuffix(kind, "List") {
			continue
		}
		links = append(links, public.APILink{Kind: kind, Id: p[1:], Href: basePath + p})
	}
	slices.SortFunc(links, func(a, b public.APILink) int { return strings.Compare(a.Id, b.Id) })
	return links
}
