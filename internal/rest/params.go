package rest

import (
	"net/http"
	"strconv"

	"github.com/gorilla/mux"
)

// defaultPageSize is the spec's default for the size parameter.
const defaultPageSize = 100

// pageParams reads page and size, already validated against the spec.
func pageParams(r *http.Request) (page, size int) {
	page, size = 1, defaultPageSize
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil {
		page = v
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("size")); err == nil {
		size = v
	}
	return page, size
}

// pathParam returns a path variable of the matched route.
func pathParam(r *http.Request, name string) string {
	return mux.Vars(r)[name]
}
