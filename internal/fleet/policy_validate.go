package fleet

import (
	"fmt"
	"maps"
	"slices"
)

// MaxObjectDepth bounds how deeply objects and arrays nest in what a user
// sends towards a hub, counting the outermost object as 1: a request body
// of the public and admin APIs, and a policy body. Every JSON decoder on the
// way (the API's validator, the agent's, the hub's) recurses once per level,
// and the hub's desired set wraps the body a few levels deeper still, so the
// bound sits far below encoding/json's own limit of 10,000.
const MaxObjectDepth = 100

// MaxPolicyBodyBytes bounds a policy body's JSON encoding. The hub's API
// server stores the Policy whole, with its managed fields, and the policy
// framework copies its spec into every selected cluster's namespace.
const MaxPolicyBodyBytes = 512 << 10

// maxSelectorTerms bounds a placement's match labels plus expressions, and
// maxSelectorValues an expression's values: each becomes a predicate of the
// resolution's query.
const (
	maxSelectorTerms  = 32
	maxSelectorValues = 64
)

// Validate checks a label selector's syntax, as Kubernetes would: keys and
// values are label syntax, In and NotIn take values, Exists and
// DoesNotExist none. Errors carry CodeValidation.
func (s LabelSelector) Validate() error {
	if n := len(s.MatchLabels) + len(s.MatchExpressions); n > maxSelectorTerms {
		return Errorf(CodeValidation, "placement.label_selector: at most %d match labels and expressions are allowed (got %d)", maxSelectorTerms, n)
	}
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		if err := ValidateLabelKey(k); err != nil {
			return Errorf(CodeValidation, "placement.label_selector.match_labels: %v", err)
		}
		if err := validateLabelValue(k, s.MatchLabels[k]); err != nil {
			return Errorf(CodeValidation, "placement.label_selector.match_labels: %v", err)
		}
	}
	for i, e := range s.MatchExpressions {
		at := fmt.Sprintf("placement.label_selector.match_expressions[%d]", i)
		if err := ValidateLabelKey(e.Key); err != nil {
			return Errorf(CodeValidation, "%s: %v", at, err)
		}
		switch e.Operator {
		case SelectorIn, SelectorNotIn:
			if len(e.Values) == 0 || len(e.Values) > maxSelectorValues {
				return Errorf(CodeValidation, "%s: operator %s needs 1 to %d values", at, e.Operator, maxSelectorValues)
			}
			for _, v := range e.Values {
				if err := validateLabelValue(e.Key, v); err != nil {
					return Errorf(CodeValidation, "%s: %v", at, err)
				}
			}
		case SelectorExists, SelectorDoesNotExist:
			if len(e.Values) > 0 {
				return Errorf(CodeValidation, "%s: operator %s takes no values", at, e.Operator)
			}
		default:
			return Errorf(CodeValidation, "%s: operator %q is not one of In, NotIn, Exists, DoesNotExist", at, e.Operator)
		}
	}
	return nil
}

// PolicyName returns a Policy body's metadata.name, "" when it has none.
func PolicyName(body map[string]any) string {
	meta, _ := body["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

// NormalizePolicyBody keeps what the fleet manager stores of a Policy body:
// apiVersion, kind, spec and, of metadata, the name, labels and
// annotations. Status and server-set metadata are the hubs' to fill. Labels
// must be label syntax without the reserved prefixes, since they go on the
// hubs' Policy beside the fleet manager's own. The body must pass
// ValidateTenantPolicy. Errors carry CodeValidation or CodePolicyInvalid.
func NormalizePolicyBody(body map[string]any) (map[string]any, error) {
	if err := ValidateTenantPolicy(body); err != nil {
		return nil, err
	}
	meta, _ := body["metadata"].(map[string]any)
	keep := map[string]any{"name": meta["name"]}
	if l, ok := meta["labels"].(map[string]any); ok && len(l) > 0 {
		labels := make(map[string]string, len(l))
		for k, v := range l {
			s, _ := v.(string)
			labels[k] = s
		}
		if err := ValidateLabels(labels); err != nil {
			return nil, Errorf(CodeValidation, "policy.metadata.labels: %v", err)
		}
		keep["labels"] = maps.Clone(l)
	}
	if a, ok := meta["annotations"].(map[string]any); ok && len(a) > 0 {
		keep["annotations"] = maps.Clone(a)
	}
	return map[string]any{"apiVersion": body["apiVersion"], "kind": body["kind"], "metadata": keep, "spec": body["spec"]}, nil
}

// Validate checks a create request's zone and placement; the body is the
// PolicyValidator's. Errors carry CodeValidation.
func (c PolicyCreate) Validate() error {
	if c.Zone != "" && !regionOrZone.MatchString(c.Zone) {
		return Errorf(CodeValidation, "zone must be a DNS label")
	}
	return c.Selector.Validate()
}

// ValidDNSLabel reports whether s is a DNS label: 1-63 lower-case letters,
// digits or '-', starting and ending alphanumeric.
func ValidDNSLabel(s string) bool { return dnsLabel.MatchString(s) }
