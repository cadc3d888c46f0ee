package fleet

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// HubTemplateStart opens a hub template. The policy framework resolves
// "{{hub ... hub}}" in a root Policy on the hub, reading from the root
// Policy's namespace, which every organisation's root Policy shares.
const HubTemplateStart = "{{hub"

// maxTenantProblems bounds how many refused fields one error lists.
const maxTenantProblems = 10

// tenantReason ends the message of every field ValidateTenantPolicy refuses.
const tenantReason = "not allowed in an organisation's policy: every organisation's policies share the policy namespace on a hub"

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidateTenantPolicy refuses what would let one organisation's policy name
// or read another's on a hub, where every organisation's root Policy lives
// in the one policy namespace (docs/adr/0011): spec.dependencies,
// spec.hubTemplateOptions, a policy template's extraDependencies, and a hub
// template anywhere in the body. An empty field is accepted. The error
// carries CodePolicyInvalid and names each field at fault by its path, never
// its value, at most maxTenantProblems of them.
func ValidateTenantPolicy(body map[string]any) error {
	var refused []string
	spec, _ := body["spec"].(map[string]any)
	for _, f := range []string{"dependencies", "hubTemplateOptions"} {
		if !isEmptyValue(spec[f]) {
			refused = append(refused, "spec."+f+": "+tenantReason)
		}
	}
	templates, _ := spec["policy-templates"].([]any)
	for i, t := range templates {
		if tm, _ := t.(map[string]any); !isEmptyValue(tm["extraDependencies"]) {
			refused = append(refused, fmt.Sprintf("spec.policy-templates[%d].extraDependencies: %s", i, tenantReason))
		}
	}
	refused = append(refused, hubTemplatePaths(body)...)
	if len(refused) == 0 {
		return nil
	}
	slices.Sort(refused)
	if n := len(refused) - maxTenantProblems; n > 0 {
		refused = append(refused[:maxTenantProblems], fmt.Sprintf("and %d more", n))
	}
	return Errorf(CodePolicyInvalid, "%s", strings.Join(refused, "; "))
}

// hubTemplatePaths returns a problem for every string of body holding a hub
// template, and for every object with a key holding one (named by the
// object's path, since the key is the value at fault). It walks the body
// with a stack rather than recursion, so no nesting can exhaust it.
func hubTemplatePaths(body map[string]any) []string {
	type node struct {
		path  string
		value any
	}
	var found []string
	stack := []node{{"", body}}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v := n.value.(type) {
		case string:
			if strings.Contains(v, HubTemplateStart) {
				found = append(found, bodyPath(n.path)+": hub templates are "+tenantReason)
			}
		case map[string]any:
			for k, child := range v {
				if strings.Contains(k, HubTemplateStart) {
					found = append(found, bodyPath(n.path)+": a key holds a hub template; hub templates are "+tenantReason)
					continue
				}
				stack = append(stack, node{joinKey(n.path, k), child})
			}
		case []any:
			for i, child := range v {
				stack = append(stack, node{n.path + "[" + strconv.Itoa(i) + "]", child})
			}
		}
	}
	return found
}

// joinKey renders the field k of the object at path as policyschema does:
// spec.policy-templates, metadata.annotations["example.com/x"].
func joinKey(path, k string) string {
	switch {
	case !plainKey.MatchString(k):
		return path + "[" + strconv.Quote(k) + "]"
	case path == "":
		return k
	default:
		return path + "." + k
	}
}

func bodyPath(path string) string {
	if path == "" {
		return "(body)"
	}
	return path
}

// isEmptyValue reports whether v is absent, null or an empty string, list or
// object.
func isEmptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	default:
		return false
	}
}
