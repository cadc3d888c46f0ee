package policyschema

import (
	"encoding/json"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// checkBounds reports a body nested deeper than fleet.MaxObjectDepth or
// larger than fleet.MaxPolicyBodyBytes as JSON. It runs before anything
// that recurses over the whole body, and a body it refuses is checked no
// further.
func checkBounds(ps *problems, body map[string]any) bool {
	if nestsDeeper(body, 1) {
		ps.add("(body)", "objects and arrays may nest at most %d levels deep", fleet.MaxObjectDepth)
		return false
	}
	// A body decoded from JSON always encodes.
	if raw, err := json.Marshal(body); err == nil && len(raw) > fleet.MaxPolicyBodyBytes {
		ps.add("(body)", "may not be more than %d bytes as JSON", fleet.MaxPolicyBodyBytes)
		return false
	}
	return true
}

// nestsDeeper reports whether v, an object or array at nesting level level,
// holds objects or arrays beyond fleet.MaxObjectDepth. It descends at most
// one level past the bound.
func nestsDeeper(v any, level int) bool {
	switch x := v.(type) {
	case map[string]any:
		if level > fleet.MaxObjectDepth {
			return true
		}
		for _, c := range x {
			if nestsDeeper(c, level+1) {
				return true
			}
		}
	case []any:
		if level > fleet.MaxObjectDepth {
			return true
		}
		for _, c := range x {
			if nestsDeeper(c, level+1) {
				return true
			}
		}
	}
	return false
}

// checkLabels checks metadata.labels as the API server does: every key a
// qualified name, every value label syntax. A key at fault is not named
// (it is the value at fault); a value is named by its key.
func checkLabels(ps *problems, body map[string]any, labels map[string]any) {
	for k, v := range labels {
		s, ok := v.(string)
		if !ok {
			continue // reported by checkEnvelope
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			ps.add("metadata.labels", "a key is not a qualified name: %s", strings.Join(msgs, "; "))
			continue
		}
		if msgs := validation.IsValidLabelValue(s); len(msgs) > 0 {
			ps.add(fieldPath(body, []string{"metadata", "labels", k}), "%s", strings.Join(msgs, "; "))
		}
	}
}

// checkAnnotations checks metadata.annotations with the API server's own
// rule (apimachinery's ValidateAnnotations): every key a qualified name in
// any case, and keys and values together within
// apivalidation.TotalAnnotationSizeLimitB bytes.
func checkAnnotations(ps *problems, annotations map[string]any) {
	strs := make(map[string]string, len(annotations))
	for k, v := range annotations {
		if s, ok := v.(string); ok {
			strs[k] = s
		}
	}
	for _, e := range apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotations")) {
		// e.Error() would repeat the key at fault; only the rule is kept.
		switch e.Type {
		case field.ErrorTypeInvalid:
			ps.add("metadata.annotations", "a key is not a qualified name: %s", e.Detail)
		case field.ErrorTypeTooLong:
			ps.add("metadata.annotations", "keys and values together may not be more than %d bytes", apivalidation.TotalAnnotationSizeLimitB)
		default:
			ps.add("metadata.annotations", "%s", e.Type)
		}
	}
}
