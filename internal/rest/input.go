package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/gorilla/mux"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Every error built here names the field and the rule a request broke, never
// what it sent: a reason reaches the caller and, at debug level, the log, and
// a refused value may be a credential.

// checkRequestText refuses text PostgreSQL cannot store and no API value
// needs: a NUL character or bytes that are not UTF-8, in a path variable, a
// query parameter or a header the operation declares.
func checkRequestText(op operation, r *http.Request) error {
	for name, v := range mux.Vars(r) {
		if !storableText(v) {
			return fleet.Errorf(fleet.CodeValidation, "path parameter %q: %s", name, textRule)
		}
	}
	for name, vs := range r.URL.Query() {
		for _, v := range vs {
			if !storableText(name) || !storableText(v) {
				return fleet.Errorf(fleet.CodeValidation, "the query parameters: %s", textRule)
			}
		}
	}
	for _, p := range op.route.Operation.Parameters {
		if p.Value == nil || p.Value.In != openapi3.ParameterInHeader {
			continue
		}
		for _, v := range r.Header.Values(p.Value.Name) {
			if !storableText(v) {
				return fleet.Errorf(fleet.CodeValidation, "header %s: %s", p.Value.Name, textRule)
			}
		}
	}
	return nil
}

// textRule is the rule checkRequestText and checkBody enforce.
const textRule = "must be UTF-8 text without NUL characters"

// storableText reports whether s is UTF-8 without NUL.
func storableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// readBody reads the whole request body, bounded by the MaxBytesReader the
// caller installed, and puts it back so that the validator and the handler
// read it again.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// decodeJSON decodes exactly one JSON value from body into v: data after the
// value is refused, as are values of the wrong type, without quoting either.
func decodeJSON(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		return fleet.Errorf(fleet.CodeMalformedBody, "the request body could not be parsed: %s", describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fleet.Errorf(fleet.CodeMalformedBody, "the request body could not be parsed: data follows its JSON value")
	}
	return nil
}

// describeJSONError says where and why encoding/json refused a body.
func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("a field must be a JSON %s", jsonKind(typ.Type.Kind().String()))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends before its JSON value does"
	default:
		return "not valid JSON"
	}
}

// jsonKind names a Go kind as the JSON type it decodes from.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr", "interface":
		return "object"
	default:
		return "number"
	}
}

// requestError turns a validation failure into the error a client sees:
// the parameter or body field and the schema rule it broke.
func requestError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fleet.Errorf(fleet.CodeBodyTooLarge, "the request body is larger than %d bytes", tooLarge.Limit)
	}
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		return fleet.Errorf(fleet.CodeValidation, "the request does not match the API specification")
	}
	var parseErr *openapi3filter.ParseError
	var schemaErr *openapi3.SchemaError
	switch {
	case reqErr.Parameter != nil:
		where := fmt.Sprintf("%s parameter %q", reqErr.Parameter.In, reqErr.Parameter.Name)
		if errors.As(reqErr.Err, &schemaErr) {
			return fleet.Errorf(fleet.CodeValidation, "%s: %s", where, schemaRule(schemaErr))
		}
		if reqErr.Err == nil || errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired) {
			return fleet.Errorf(fleet.CodeValidation, "%s is required", where)
		}
		return fleet.Errorf(fleet.CodeValidation, "%s: must be %s", where, schemaType(reqErr.Parameter.Schema))
	case reqErr.RequestBody != nil && errors.As(reqErr.Err, &parseErr):
		return fleet.Errorf(fleet.CodeMalformedBody, "the request body could not be parsed: not valid JSON")
	case reqErr.RequestBody != nil && errors.As(reqErr.Err, &schemaErr):
		at := schemaPath(bodySchema(reqErr.RequestBody), schemaErr.JSONPointer())
		if at == "" {
			at = "the request body"
		}
		return fleet.Errorf(fleet.CodeValidation, "%s: %s", at, schemaRule(schemaErr))
	case reqErr.RequestBody != nil && (errors.Is(reqErr.Err, openapi3filter.ErrInvalidEmptyValue) ||
		errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired)):
		return fleet.Errorf(fleet.CodeValidation, "the request body is required")
	case reqErr.RequestBody != nil:
		return fleet.Errorf(fleet.CodeValidation, "the request body does not match the API specification")
	}
	return fleet.Errorf(fleet.CodeValidation, "the request does not match the API specification")
}

// schemaType names the type a parameter's schema asks for.
func schemaType(ref *openapi3.SchemaRef) string {
	if ref == nil || ref.Value == nil || ref.Value.Type == nil || len(ref.Value.Type.Slice()) == 0 {
		return "a valid value"
	}
	return "a valid " + strings.Join(ref.Value.Type.Slice(), " or ")
}

// quotedName finds the property a required or additionalProperties failure
// names in kin-openapi's reason: `property "x" is missing`.
var quotedName = regexp.MustCompile(`property "([^"]*)"`)

// schemaRule describes the rule of the schema that failed, with the bounds
// the schema states, never the value.
func schemaRule(e *openapi3.SchemaError) string {
	s := e.Schema
	if s == nil {
		return "does not match the API specification"
	}
	switch e.SchemaField {
	case "required":
		if m := quotedName.FindStringSubmatch(e.Reason); m != nil {
			if _, ok := s.Properties[m[1]]; ok {
				return fmt.Sprintf("property %q is required", m[1])
			}
		}
		return fmt.Sprintf("the properties %v are required", s.Required)
	case "properties", "additionalProperties", "unevaluatedProperties":
		if strings.Contains(e.Reason, "unsupported") || e.SchemaField != "properties" {
			return fmt.Sprintf("a property is not allowed here; the properties are %v", slices.Sorted(maps.Keys(s.Properties)))
		}
		return "a property does not match the API specification"
	case "type", "nullable":
		return "must be " + schemaType(&openapi3.SchemaRef{Value: s})
	case "enum":
		return fmt.Sprintf("must be one of %v", s.Enum)
	case "pattern":
		return fmt.Sprintf("must match %q", s.Pattern)
	case "format":
		return fmt.Sprintf("must be in the format %q", s.Format)
	case "minLength":
		return fmt.Sprintf("must be at least %d characters long", s.MinLength)
	case "maxLength":
		return fmt.Sprintf("must be at most %d characters long", derefOr(s.MaxLength))
	case "minimum", "exclusiveMinimum":
		return fmt.Sprintf("must be at least %v", derefOr(s.Min))
	case "maximum", "exclusiveMaximum":
		return fmt.Sprintf("must be at most %v", derefOr(s.Max))
	case "minItems":
		return fmt.Sprintf("must have at least %d items", s.MinItems)
	case "maxItems":
		return fmt.Sprintf("must have at most %d items", derefOr(s.MaxItems))
	case "minProperties":
		return fmt.Sprintf("must have at least %d properties", s.MinProps)
	case "maxProperties":
		return fmt.Sprintf("must have at most %d properties", derefOr(s.MaxProps))
	case "uniqueItems":
		return "must not repeat an item"
	default:
		return fmt.Sprintf("does not satisfy the schema's %q rule", e.SchemaField)
	}
}

func derefOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// bodySchema returns the JSON schema of a request body.
func bodySchema(body *openapi3.RequestBody) *openapi3.SchemaRef {
	if mt := body.Content.Get("application/json"); mt != nil {
		return mt.Schema
	}
	for _, mt := range body.Content {
		return mt.Schema
	}
	return nil
}

// schemaPath renders a JSON pointer into a body as a field path: the
// properties the schema names, array indexes, and '*' for a key the caller
// chose (a label key, say), which may be anything, a secret included.
func schemaPath(root *openapi3.SchemaRef, segments []string) string {
	parts := make([]string, 0, len(segments))
	s := root
	for _, seg := range segments {
		var next *openapi3.SchemaRef
		switch {
		case s == nil || s.Value == nil:
			seg = "*"
		case s.Value.Properties[seg] != nil:
			next = s.Value.Properties[seg]
		case s.Value.Items != nil && isIndex(seg):
			next = s.Value.Items
		default:
			next, seg = s.Value.AdditionalProperties.Schema, "*"
		}
		parts, s = append(parts, seg), next
	}
	return strings.Join(parts, ".")
}

// isIndex reports whether seg is an array index.
func isIndex(seg string) bool {
	return seg != "" && strings.Trim(seg, "0123456789") == ""
}
