package rest

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
)

// spec is one loaded OpenAPI document with its server set to the deployment's
// base path.
type spec struct {
	file string
	doc  *openapi3.T
	json []byte
}

// loadSpec reads, parses and validates one specification.
func loadSpec(ctx context.Context, specs fs.FS, file, basePath string) (*spec, error) {
	data, err := fs.ReadFile(specs, file)
	if err != nil {
		return nil, fmt.Errorf("loadSpec(%s): %w", file, err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("loadSpec(%s): %w", file, err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("loadSpec(%s): invalid specification: %w", file, err)
	}
	doc.Servers = openapi3.Servers{{URL: basePath}}
	js, err := doc.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("loadSpec(%s): %w", file, err)
	}
	return &spec{file: file, doc: doc, json: js}, nil
}

// operation is one operation of a spec, as a route of the API server.
type operation struct {
	spec  *spec
	route routers.Route
}

// operations lists every operation of the spec.
func (s *spec) operations() []operation {
	var ops []operation
	for _, path := range s.doc.Paths.InMatchingOrder() {
		item := s.doc.Paths.Value(path)
		for method, op := range item.Operations() {
			ops = append(ops, operation{spec: s, route: routers.Route{
				Spec: s.doc, Path: path, PathItem: item, Method: method, Operation: op,
			}})
		}
	}
	return ops
}

// handlerFunc is an API handler; it returns an error instead of writing one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error
