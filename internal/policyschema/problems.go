package policyschema

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// maxListed bounds how many problems one error message lists.
const maxListed = 10

// problem is one field at fault: its path, as rendered by fieldPath, and
// what is wrong with it.
type problem struct {
	path    string
	message string
}

// problems gathers the faults of one body.
type problems []problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, problem{path: path, message: fmt.Sprintf(format, args...)})
}

// err returns nil without problems, else a CodePolicyInvalid error listing
// them sorted by path, without duplicates, at most maxListed of them.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b problem) int {
		return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.message, b.message))
	})
	sorted = slices.Compact(sorted)
	lines := make([]string, 0, min(len(sorted), maxListed)+1)
	for _, p := range sorted[:min(len(sorted), maxListed)] {
		lines = append(lines, p.path+": "+p.message)
	}
	if n := len(sorted) - maxListed; n > 0 {
		lines = append(lines, fmt.Sprintf("and %d more", n))
	}
	return fleet.Errorf(fleet.CodePolicyInvalid, "%s", strings.Join(lines, "; "))
}

// checkEnvelope checks what the CRD's schema leaves to the API server:
// apiVersion, kind, metadata's name, labels and annotations (their types,
// then checkLabels and checkAnnotations), and spec's presence (the schema
// requires it too; the duplicate is dropped).
func checkEnvelope(ps *problems, body map[string]any) {
	for _, f := range []struct{ name, want string }{
		{"apiVersion", fleet.PolicyAPIVersion},
		{"kind", fleet.PolicyKind},
	} {
		if got, ok := body[f.name].(string); !ok || got != f.want {
			ps.add(f.name, "must be %q", f.want)
		}
	}
	if _, ok := body["spec"]; !ok {
		ps.add("spec", "field is required")
	}
	meta, ok := body["metadata"].(map[string]any)
	if !ok {
		if _, present := body["metadata"]; !present {
			ps.add("metadata", "field is required")
		}
		// A metadata of another type is the schema's to report.
		return
	}
	switch name, ok := meta["name"].(string); {
	case meta["name"] == nil || name == "" && ok:
		ps.add("metadata.name", "field is required")
	case !ok:
		ps.add("metadata.name", "value must be a string")
	default:
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			ps.add("metadata.name", "%s", strings.Join(msgs, "; "))
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		v, present := meta[field]
		if !present || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			ps.add("metadata."+field, "value must be a map of strings")
			continue
		}
		for k, val := range m {
			if _, ok := val.(string); !ok {
				ps.add(fieldPath(body, []string{"metadata", field, k}), "value must be a string")
			}
		}
		if field == "labels" {
			checkLabels(ps, body, m)
		} else {
			checkAnnotations(ps, m)
		}
	}
}

// collect adds the problems kin-openapi reported in err, a *SchemaError or
// a MultiError of them, for body. Each is rendered from the error's
// structured fields (SchemaField, Schema, JSONPointer), never from its
// Reason or Value, so that no message repeats a submitted value.
func collect(ps *problems, body map[string]any, err error) {
	var se *openapi3.SchemaError
	switch e := err.(type) {
	case openapi3.MultiError:
		for _, err := range e {
			collect(ps, body, err)
		}
		return
	case *openapi3.SchemaError:
		se = e
	default:
		// Not a finding about a field (e.g. an unresolved reference):
		// report it rather than drop it.
		ps.add("(body)", "%v", err)
		return
	}
	pointer := se.JSONPointer()
	path := fieldPath(body, pointer)
	switch se.SchemaField {
	case "properties":
		if names := unsupportedProperties(se); len(names) > 0 {
			for _, name := range names {
				ps.add(fieldPath(body, append(slices.Clip(pointer), name)), "unknown field")
			}
			return
		}
		ps.add(path, "%s", rule(se))
	case "oneOf", "anyOf", "allOf":
		ps.add(path, "%s", rule(se)+branchDetails(body, pointer, se))
	default:
		ps.add(path, "%s", rule(se))
	}
}

// rule describes the schema rule a SchemaError reports, with the bounds the
// schema states and never the value.
func rule(se *openapi3.SchemaError) string {
	msg, _ := knownRule(se)
	return msg
}

// knownRule renders the rules kin-openapi reports for an OpenAPI 3.0 schema,
// in kin-openapi's wording rebuilt from the schema. A rule it does not know
// (known is false) is only named, so that the answer stays a value-free
// PolicyInvalid; TestEveryPolicySchemaFailureIsRecognised keeps the Policy CRD's
// rules known.
func knownRule(se *openapi3.SchemaError) (msg string, known bool) {
	s := se.Schema
	if s == nil {
		s = &openapi3.Schema{}
	}
	switch se.SchemaField {
	case "required":
		return "field is required", true
	case "nullable":
		return "value must not be null", true
	case "properties":
		if len(unsupportedProperties(se)) > 0 {
			return "unknown field", true
		}
	case "type":
		if types := s.Type.Slice(); len(types) > 0 {
			return "value must be " + typeName(types), true
		}
	case "enum":
		if allowed, err := json.Marshal(s.Enum); err == nil {
			return "value is not one of the allowed values " + string(allowed), true
		}
	case "not":
		return `value must not match the "not" schema`, true
	case "oneOf":
		if errors.Is(se.Origin, openapi3.ErrOneOfConflict) {
			return `value matches more than one schema from "oneOf"`, true
		}
		return `value doesn't match any schema from "oneOf"`, true
	case "anyOf":
		return `value doesn't match any schema from "anyOf"`, true
	case "allOf":
		return `value doesn't match all schemas from "allOf"`, true
	case "minLength":
		return fmt.Sprintf("minimum string length is %d", s.MinLength), true
	case "maxLength":
		if s.MaxLength != nil {
			return fmt.Sprintf("maximum string length is %d", *s.MaxLength), true
		}
	case "pattern":
		return fmt.Sprintf("string doesn't match the regular expression %q", s.Pattern), true
	case "format":
		return fmt.Sprintf("string doesn't match the format %q", s.Format), true
	case "minItems":
		return fmt.Sprintf("minimum number of items is %d", s.MinItems), true
	case "maxItems":
		if s.MaxItems != nil {
			return fmt.Sprintf("maximum number of items is %d", *s.MaxItems), true
		}
	case "uniqueItems":
		return "duplicate items found", true
	}
	return fmt.Sprintf("value does not satisfy the schema's %q rule", se.SchemaField), false
}

// typeName renders the types a schema asks for as kin-openapi does: "a
// string", "an object", "one of string, integer".
func typeName(types []string) string {
	if len(types) > 1 {
		return "one of " + strings.Join(types, ", ")
	}
	switch types[0] {
	case openapi3.TypeArray, openapi3.TypeObject, openapi3.TypeInteger:
		return "an " + types[0]
	}
	return "a " + types[0]
}

// unsupportedProperties returns the fields of the object a "properties"
// failure rejects that its schema, closed by additionalProperties: false,
// does not list, sorted. kin-openapi reports each such field as one error on
// the object; the duplicates this yields are dropped with the others.
func unsupportedProperties(se *openapi3.SchemaError) []string {
	obj, ok := se.Value.(map[string]any)
	if !ok || se.Schema == nil || se.Schema.AdditionalProperties.Has == nil || *se.Schema.AdditionalProperties.Has {
		return nil
	}
	var names []string
	for name := range obj {
		if _, listed := se.Schema.Properties[name]; !listed {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// branchDetails renders why each branch of a failed combinator failed, paths
// relative to the combinator's value, e.g. ` (branch 1: namespace: maximum
// string length is 0; branch 2: ...)`.
func branchDetails(body map[string]any, pointer []string, se *openapi3.SchemaError) string {
	var branches openapi3.MultiError
	if se.Origin == nil || !errors.As(se.Origin, &branches) || len(branches) == 0 {
		return ""
	}
	prefix := fieldPath(body, pointer)
	parts := make([]string, 0, len(branches))
	for i, b := range branches {
		var sub problems
		collect(&sub, body, b)
		slices.SortFunc(sub, func(a, b problem) int {
			return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.message, b.message))
		})
		msgs := make([]string, 0, len(sub))
		for _, p := range slices.Compact(sub) {
			rel := strings.TrimPrefix(strings.TrimPrefix(p.path, prefix), ".")
			if rel == "" {
				msgs = append(msgs, p.message)
			} else {
				msgs = append(msgs, rel+": "+p.message)
			}
		}
		parts = append(parts, fmt.Sprintf("branch %d: %s", i+1, strings.Join(msgs, ", ")))
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

var plainKeyRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// fieldPath renders a JSON pointer into body as a field path:
// spec.policy-templates[0].objectDefinition. A segment is an index when the
// value it steps into is an array; a key with characters other than letters,
// digits, '-' and '_' is quoted: metadata.labels["app.kubernetes.io/name"].
func fieldPath(body map[string]any, pointer []string) string {
	var b strings.Builder
	var cur any = body
	for _, seg := range pointer {
		if arr, ok := cur.([]any); ok {
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(arr) {
				fmt.Fprintf(&b, "[%d]", i)
				cur = arr[i]
				continue
			}
		}
		switch {
		case !plainKeyRe.MatchString(seg):
			fmt.Fprintf(&b, "[%s]", strconv.Quote(seg))
		case b.Len() == 0:
			b.WriteString(seg)
		default:
			b.WriteString("." + seg)
		}
		m, _ := cur.(map[string]any)
		cur = m[seg]
	}
	if b.Len() == 0 {
		return "(body)"
	}
	return b.String()
}
