// Package apitest checks, in tests, that every response the API gives matches
// its OpenAPI specification: wrap the generated client's HTTP client with
// ValidatingClient and every response is validated as it arrives.
package apitest

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// validatingTransport validates each response against the spec.
type validatingTransport struct {
	t      testing.TB
	router routers.Router
	next   http.RoundTripper
}

// ValidatingClient returns an HTTP client whose responses are validated against
// the specification file of specs, served at serverURL (scheme, host and base
// path). A response that does not match fails t; a request to a path the spec
// does not have is passed through unvalidated (tests of unknown paths assert
// the error body themselves).
func ValidatingClient(t testing.TB, specs fs.FS, file, serverURL string) *http.Client {
	t.Helper()
	data, err := fs.ReadFile(specs, file)
	if err != nil {
		t.Fatalf("apitest: reading %s: %v", file, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("apitest: loading %s: %v", file, err)
	}
	doc.Servers = openapi3.Servers{{URL: serverURL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("apitest: routing %s: %v", file, err)
	}
	return &http.Client{Transport: &validatingTransport{t: t, router: router, next: http.DefaultTransport}}
}

// RoundTrip sends the request and validates the response.
func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		v.t.Errorf("%s %s answered %d with a response its specification does not allow: %v\nbody: %s",
			req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	return resp, nil
}
