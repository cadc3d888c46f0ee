package policyschema

import (
	"errors"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// Rule is rule, for the test of a rule the package does not know.
var Rule = rule

// SchemaRules lists, sorted, the rules of the Policy CRD's schema a body can
// fail, by kin-openapi's SchemaField names. A rule under a "not" is left
// out: its failure is the not's success.
func (v *Validator) SchemaRules() []string {
	seen := map[*openapi3.Schema]bool{}
	var rules []string
	var walk func(ref *openapi3.SchemaRef)
	walkSchema := func(s *openapi3.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		add := func(on bool, field string) {
			if on {
				rules = append(rules, field)
			}
		}
		add(len(s.Type.Slice()) > 0, "type")
		add(len(s.Type.Slice()) > 0 && !s.Nullable, "nullable")
		add(len(s.Enum) > 0, "enum")
		add(len(s.Required) > 0, "required")
		add(s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has, "properties")
		add(len(s.OneOf) > 0, "oneOf")
		add(len(s.AnyOf) > 0, "anyOf")
		add(len(s.AllOf) > 0, "allOf")
		add(s.Not != nil, "not")
		add(s.MinLength > 0, "minLength")
		add(s.MaxLength != nil, "maxLength")
		add(s.Pattern != "", "pattern")
		add(s.Format != "", "format")
		add(s.MinItems > 0, "minItems")
		add(s.MaxItems != nil, "maxItems")
		add(s.UniqueItems, "uniqueItems")
		add(s.Min != nil, "minimum")
		add(s.Max != nil, "maximum")
		add(s.MultipleOf != nil, "multipleOf")
		add(s.MinProps > 0, "minProperties")
		add(s.MaxProps != nil, "maxProperties")
		add(s.Discriminator != nil, "discriminator")
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, refs := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for _, r := range refs {
				walk(r)
			}
		}
	}
	walk = func(ref *openapi3.SchemaRef) {
		if ref != nil {
			walkSchema(ref.Value)
		}
	}
	walkSchema(v.schema)
	slices.Sort(rules)
	return slices.Compact(rules)
}

// SchemaFailures checks body against the schema alone and returns the
// SchemaField of every failure kin-openapi reports, a combinator's branches
// included, and of those this package does not recognise.
func (v *Validator) SchemaFailures(body map[string]any) (fields, unrecognised []string) {
	var walk func(err error)
	walk = func(err error) {
		var me openapi3.MultiError
		switch e := err.(type) {
		case nil:
		case openapi3.MultiError:
			for _, err := range e {
				walk(err)
			}
		case *openapi3.SchemaError:
			fields = append(fields, e.SchemaField)
			if _, known := knownRule(e); !known {
				unrecognised = append(unrecognised, e.SchemaField)
			}
			if e.Origin != nil && errors.As(e.Origin, &me) {
				walk(me)
			}
		default:
			unrecognised = append(unrecognised, err.Error())
		}
	}
	walk(v.schema.VisitJSON(body, openapi3.MultiErrors()))
	return fields, unrecognised
}
