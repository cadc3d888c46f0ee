// Package policyschema validates configuration policy bodies against the
// openAPIV3Schema of the Policy CRD (policy.open-cluster-management.io/v1)
// that RHACM hubs serve. The CRD is embedded as an unmodified copy of the
// upstream YAML; its served storage version's schema is loaded once into a
// kin-openapi schema and applied to each body.
//
// Kubernetes schema extensions are honoured as follows:
//
//   - x-kubernetes-preserve-unknown-fields: true keeps an object open: any
//     field, of any content, is accepted (e.g. a policy template's
//     objectDefinition), exactly as the API server keeps it.
//   - Other x-kubernetes-* keys (int-or-string, embedded-resource,
//     list-type, ...) are kept as schema extensions and do not change what
//     is accepted here; an int-or-string schema without a type accepts any
//     value. The Policy CRD uses none of them.
//
// Unknown fields: a structural schema makes the API server prune fields it
// does not know, silently. Here, under spec, an object whose schema lists
// properties and does not preserve unknown fields rejects any other field
// (kin-openapi's additionalProperties: false), so that a typo such as
// spec.remediationActon is a clear error rather than a policy that silently
// loses a setting. Outside spec (the top level, status) unknown fields are
// left to the hubs' pruning, as the API server would do.
//
// The CRD's schema says nothing of metadata beyond it being an object, so the
// validator checks what the API server would: apiVersion and kind name the
// Policy kind, metadata.name is a DNS-1123 subdomain, metadata.labels and
// metadata.annotations are maps of strings when present, label keys and
// annotation keys are qualified names, label values have label syntax, the
// annotations stay within the API server's total size, and spec is present. Before all of it,
// a body nested deeper than fleet.MaxObjectDepth or larger than
// fleet.MaxPolicyBodyBytes is refused and checked no further.
package policyschema

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// crdYAML is the Policy CRD as governance-policy-propagator publishes it,
// at the version scripts/crds.sh pins.
//
//go:embed policy.open-cluster-management.io_policies.yaml
var crdYAML []byte

// CRD returns the embedded Policy CRD's YAML, for the test hub that installs
// it beside the other hub CRDs.
func CRD() []byte {
	return slices.Clone(crdYAML)
}

// extPreserveUnknownFields is the Kubernetes schema extension that keeps an
// object open to any field.
const extPreserveUnknownFields = "x-kubernetes-preserve-unknown-fields"

// Validator checks Policy bodies against the Policy CRD's schema. It is
// immutable once made and safe for concurrent use.
type Validator struct {
	schema *openapi3.Schema
}

var _ fleet.PolicyValidator = (*Validator)(nil)

// New loads the embedded Policy CRD's schema: that of the version that is
// both served and stored.
func New() (*Validator, error) {
	schema, err := loadSchema(crdYAML)
	if err != nil {
		return nil, fmt.Errorf("policyschema: %w", err)
	}
	return &Validator{schema: schema}, nil
}

// crdDocument is the part of a CustomResourceDefinition the loader reads.
type crdDocument struct {
	Kind string `json:"kind"`
	Spec struct {
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name    string `json:"name"`
			Served  bool   `json:"served"`
			Storage bool   `json:"storage"`
			Schema  struct {
				OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// loadSchema parses a CRD's YAML and returns its served storage version's
// openAPIV3Schema, adapted as the package comment says.
func loadSchema(crd []byte) (*openapi3.Schema, error) {
	doc, err := yaml.YAMLToJSON(crd)
	if err != nil {
		return nil, fmt.Errorf("converting the CRD to JSON: %w", err)
	}
	var def crdDocument
	if err := json.Unmarshal(doc, &def); err != nil {
		return nil, fmt.Errorf("decoding the CRD: %w", err)
	}
	if def.Kind != "CustomResourceDefinition" || def.Spec.Names.Kind != fleet.PolicyKind {
		return nil, fmt.Errorf("the embedded document is a %s of %s, not the Policy CustomResourceDefinition", def.Kind, def.Spec.Names.Kind)
	}
	var raw json.RawMessage
	for _, v := range def.Spec.Versions {
		if v.Served && v.Storage {
			raw = v.Schema.OpenAPIV3Schema
			break
		}
	}
	if len(raw) == 0 {
		return nil, errors.New("the CRD has no served storage version with an openAPIV3Schema")
	}
	schema := &openapi3.Schema{}
	if err := json.Unmarshal(raw, schema); err != nil {
		return nil, fmt.Errorf("decoding the openAPIV3Schema: %w", err)
	}
	adapt(schema, false)
	spec := schema.Properties["spec"]
	if spec == nil || spec.Value == nil {
		return nil, errors.New("the openAPIV3Schema has no spec property")
	}
	adapt(spec.Value, true)
	if err := schema.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the openAPIV3Schema is not a valid schema: %w", err)
	}
	return schema, nil
}

// adapt closes the object schemas of schema and its subschemas when strict:
// an object schema that lists properties and does not preserve unknown
// fields then rejects any other field. Open objects need nothing, since
// kin-openapi accepts any field a schema does not forbid.
func adapt(schema *openapi3.Schema, strict bool) {
	if schema == nil {
		return
	}
	preserve := isTrue(schema.Extensions[extPreserveUnknownFields])
	if strict && !preserve && schema.Type != nil && schema.Type.Is(openapi3.TypeObject) &&
		len(schema.Properties) > 0 && schema.AdditionalProperties.Has == nil && schema.AdditionalProperties.Schema == nil {
		schema.AdditionalProperties.Has = openapi3.Ptr(false)
	}
	for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
		adaptRef(schema.Properties[name], strict)
	}
	adaptRef(schema.Items, strict)
	adaptRef(schema.AdditionalProperties.Schema, strict)
	// The branches of a combinator constrain the value the enclosing schema
	// already types; they never close it, so they stay lenient.
	for _, refs := range []openapi3.SchemaRefs{schema.AllOf, schema.AnyOf, schema.OneOf} {
		for _, ref := range refs {
			adaptRef(ref, false)
		}
	}
	adaptRef(schema.Not, false)
}

func adaptRef(ref *openapi3.SchemaRef, strict bool) {
	if ref != nil {
		adapt(ref.Value, strict)
	}
}

func isTrue(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// ValidatePolicy checks body, a Policy as decoded from JSON, against the
// Policy CRD's schema and the metadata rules of the package comment. The
// error is a CodePolicyInvalid *fleet.Error whose message names each field
// at fault by its path, e.g. "spec.remediationAction: value is not one of
// the allowed values [...]"; at most maxListed problems are listed, in path
// order.
func (v *Validator) ValidatePolicy(body map[string]any) error {
	var ps problems
	if body == nil {
		body = map[string]any{}
	}
	if !checkBounds(&ps, body) {
		return ps.err()
	}
	checkEnvelope(&ps, body)
	if err := v.schema.VisitJSON(body, openapi3.MultiErrors()); err != nil {
		collect(&ps, body, err)
	}
	return ps.err()
}
