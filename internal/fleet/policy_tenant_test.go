package fleet_test

import (
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// tenantPolicy is a valid Policy body whose spec the case changes.
func tenantPolicy(change func(spec, template map[string]any)) map[string]any {
	template := map[string]any{"objectDefinition": map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
		"metadata": map[string]any{"name": "audit-ns"},
		"spec": map[string]any{"remediationAction": "inform", "object-templates": []any{
			map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "audit", "namespace": "default"},
				"data": map[string]any{"team": "platform"}}},
		}},
	}}
	spec := map[string]any{"remediationAction": "inform", "disabled": false, "policy-templates": []any{template}}
	if change != nil {
		change(spec, template)
	}
	return map[string]any{"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind,
		"metadata": map[string]any{"name": "audit"}, "spec": spec}
}

// configMapData is the data of the ConfigMap tenantPolicy's template defines.
func configMapData(template map[string]any) map[string]any {
	def := template["objectDefinition"].(map[string]any)
	ot := def["spec"].(map[string]any)["object-templates"].([]any)[0].(map[string]any)
	return ot["objectDefinition"].(map[string]any)["data"].(map[string]any)
}

// secretMarker stands for another organisation's policy; no error may repeat it.
const secretMarker = "org-b-secret-policy"

func TestValidateTenantPolicy(t *testing.T) {
	t.Parallel()
	lookup := `{{hub (lookup "policy.open-cluster-management.io/v1" "Policy" "fleet-policies" "` + secretMarker + `").spec hub}}`
	dependency := []any{map[string]any{"apiVersion": fleet.PolicyAPIVersion, "kind": "Policy",
		"name": secretMarker, "namespace": "fleet-policies", "compliance": "Compliant"}}
	tests := []struct {
		name   string
		change func(spec, template map[string]any)
		field  string // the field the error must name; "" when valid
	}{
		{"plain policy", nil, ""},
		{"empty dependencies", func(s, _ map[string]any) { s["dependencies"] = []any{} }, ""},
		{"empty extraDependencies", func(_, tm map[string]any) { tm["extraDependencies"] = []any{} }, ""},
		{"empty hubTemplateOptions", func(s, _ map[string]any) { s["hubTemplateOptions"] = map[string]any{} }, ""},
		{"managed-cluster template", func(_, tm map[string]any) {
			configMapData(tm)["cm"] = `{{ (lookup "v1" "ConfigMap" "default" "x").data.y }}`
		}, ""},
		{"dependencies", func(s, _ map[string]any) { s["dependencies"] = dependency }, "spec.dependencies"},
		{"hubTemplateOptions", func(s, _ map[string]any) {
			s["hubTemplateOptions"] = map[string]any{"serviceAccountName": secretMarker}
		}, "spec.hubTemplateOptions"},
		{"extraDependencies", func(_, tm map[string]any) { tm["extraDependencies"] = dependency }, "spec.policy-templates[0].extraDependencies"},
		{"hub template lookup", func(_, tm map[string]any) { configMapData(tm)["copied"] = lookup },
			"spec.policy-templates[0].objectDefinition.spec.object-templates[0].objectDefinition.data.copied"},
		{"hub template under a dotted key", func(_, tm map[string]any) { configMapData(tm)["a.b"] = lookup },
			`spec.policy-templates[0].objectDefinition.spec.object-templates[0].objectDefinition.data["a.b"]`},
		{"hub template in a key", func(_, tm map[string]any) { configMapData(tm)[lookup] = "x" },
			"spec.policy-templates[0].objectDefinition.spec.object-templates[0].objectDefinition.data: a key holds a hub template"},
		{"hub template in a raw template", func(_, tm map[string]any) {
			def := tm["objectDefinition"].(map[string]any)["spec"].(map[string]any)
			delete(def, "object-templates")
			def["object-templates-raw"] = "- complianceType: musthave\n  objectDefinition:\n    data:\n      x: '" + lookup + "'\n"
		}, "spec.policy-templates[0].objectDefinition.spec.object-templates-raw"},
		{"hub template with trimmed space", func(_, tm map[string]any) { configMapData(tm)["x"] = "{{hub- .ManagedClusterName -hub}}" },
			"objectDefinition.data.x"},
	}
	for _, tc := range tests {
		err := fleet.ValidateTenantPolicy(tenantPolicy(tc.change))
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: ValidateTenantPolicy() = %v, want nil", tc.name, err)
		case tc.field == "":
		case err == nil:
			t.Errorf("%s: ValidateTenantPolicy() = nil, want an error naming %s", tc.name, tc.field)
		case fleet.ErrorCodeOf(err) != fleet.CodePolicyInvalid:
			t.Errorf("%s: ValidateTenantPolicy() = %v (code %d), want code %d", tc.name, err, fleet.ErrorCodeOf(err), fleet.CodePolicyInvalid)
		case !strings.Contains(err.Error(), tc.field):
			t.Errorf("%s: ValidateTenantPolicy() = %v, want it to name %s", tc.name, err, tc.field)
		case strings.Contains(err.Error(), secretMarker) || strings.Contains(err.Error(), "lookup"):
			t.Errorf("%s: ValidateTenantPolicy() = %v, echoes the value", tc.name, err)
		}
	}
}

// TestNormalizePolicyBodyRefusesCrossTenantFields keeps the store's path,
// which normalizes every body it writes, behind the tenant rule.
func TestNormalizePolicyBodyRefusesCrossTenantFields(t *testing.T) {
	t.Parallel()
	body := tenantPolicy(func(s, _ map[string]any) {
		s["dependencies"] = []any{map[string]any{"kind": "Policy", "name": secretMarker, "compliance": "Compliant"}}
	})
	if _, err := fleet.NormalizePolicyBody(body); fleet.ErrorCodeOf(err) != fleet.CodePolicyInvalid {
		t.Errorf("NormalizePolicyBody(with dependencies) = %v, want code %d", err, fleet.CodePolicyInvalid)
	}
}

func TestValidateTenantPolicyCapsItsList(t *testing.T) {
	t.Parallel()
	body := tenantPolicy(func(_, tm map[string]any) {
		for i := range 12 {
			configMapData(tm)["k"+strings.Repeat("x", i)] = "{{hub .ManagedClusterName hub}}"
		}
	})
	err := fleet.ValidateTenantPolicy(body)
	if err == nil || !strings.HasSuffix(err.Error(), "; and 2 more") || strings.Count(err.Error(), "hub templates are") != 10 {
		t.Errorf("ValidateTenantPolicy(12 hub templates) = %v, want 10 listed and 2 more", err)
	}
}
