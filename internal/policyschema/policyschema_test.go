package policyschema_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/policyschema"
)

// validPolicyJSON is a realistic Policy, as a client would post it.
const validPolicyJSON = `{
  "apiVersion": "policy.open-cluster-management.io/v1",
  "kind": "Policy",
  "metadata": {
    "name": "policy-namespace.prod",
    "labels": {"team": "platform"},
    "annotations": {"policy.open-cluster-management.io/standards": "NIST SP 800-53"}
  },
  "spec": {
    "remediationAction": "inform",
    "disabled": false,
    "copyPolicyMetadata": true,
    "dependencies": [
      {"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy", "name": "base", "namespace": "policies", "compliance": "Compliant"}
    ],
    "policy-templates": [
      {
        "ignorePending": false,
        "extraDependencies": [
          {"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "name": "other", "compliance": "Compliant"}
        ],
        "objectDefinition": {
          "apiVersion": "policy.open-cluster-management.io/v1",
          "kind": "ConfigurationPolicy",
          "metadata": {"name": "policy-namespace-prod"},
          "spec": {
            "remediationAction": "inform",
            "severity": "low",
            "evaluationInterval": {"compliant": "10m", "noncompliant": "45s"},
            "pruneObjectBehavior": "None",
            "object-templates": [
              {
                "complianceType": "musthave",
                "recordDiff": "InStatus",
                "objectDefinition": {
                  "apiVersion": "v1",
                  "kind": "Namespace",
                  "metadata": {"name": "prod", "labels": {"tier": "1"}},
                  "spec": {"finalizers": ["kubernetes"]}
                }
              }
            ],
            "customUnknownKnob": {"replicas": 3, "ratio": 0.5, "enabled": true, "list": [1, "two", null]}
          }
        }
      }
    ]
  }
}`

// validPolicy returns a fresh decoding of validPolicyJSON: numbers are
// float64, as the REST edge decodes them.
func validPolicy(t *testing.T) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal([]byte(validPolicyJSON), &body); err != nil {
		t.Fatalf("decoding the valid policy: %v", err)
	}
	return body
}

func newValidator(t *testing.T) *policyschema.Validator {
	t.Helper()
	v, err := policyschema.New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func spec(body map[string]any) map[string]any { return body["spec"].(map[string]any) }

func meta(body map[string]any) map[string]any { return body["metadata"].(map[string]any) }

func template0(body map[string]any) map[string]any {
	return spec(body)["policy-templates"].([]any)[0].(map[string]any)
}

func TestValidPolicyPasses(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	v := newValidator(t)
	body := validPolicy(t)
	g.Expect(v.ValidatePolicy(body)).To(gomega.Succeed())
	g.Expect(body).To(gomega.Equal(validPolicy(t)), "validation must not change the body")

	// The minimal policy: the fields the schema and the envelope require.
	minimal := map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1",
		"kind":       "Policy",
		"metadata":   map[string]any{"name": "p"},
		"spec": map[string]any{
			"disabled":         true,
			"policy-templates": []any{map[string]any{"objectDefinition": map[string]any{}}},
		},
	}
	g.Expect(v.ValidatePolicy(minimal)).To(gomega.Succeed())
}

func TestInvalidPolicies(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	for _, tc := range []struct {
		name   string
		mutate func(body map[string]any)
		want   []string
	}{
		{"wrong apiVersion", func(b map[string]any) { b["apiVersion"] = "policy.open-cluster-management.io/v1beta1" },
			[]string{`apiVersion: must be "policy.open-cluster-management.io/v1"`}},
		{"apiVersion of another type", func(b map[string]any) { b["apiVersion"] = 1.0 },
			[]string{`apiVersion: must be "policy.open-cluster-management.io/v1"`, "apiVersion: value must be a string"}},
		{"wrong kind", func(b map[string]any) { b["kind"] = "ConfigurationPolicy" },
			[]string{`kind: must be "Policy"`}},
		{"missing kind", func(b map[string]any) { delete(b, "kind") },
			[]string{`kind: must be "Policy"`}},
		{"missing metadata", func(b map[string]any) { delete(b, "metadata") },
			[]string{"metadata: field is required"}},
		{"missing metadata.name", func(b map[string]any) { delete(meta(b), "name") },
			[]string{"metadata.name: field is required"}},
		{"empty metadata.name", func(b map[string]any) { meta(b)["name"] = "" },
			[]string{"metadata.name: field is required"}},
		{"uppercase name", func(b map[string]any) { meta(b)["name"] = "My-Policy" },
			[]string{"metadata.name: a lowercase RFC 1123 subdomain"}},
		{"name too long", func(b map[string]any) { meta(b)["name"] = strings.Repeat("a", 254) },
			[]string{"metadata.name: must be no more than 253 characters"}},
		{"name not a string", func(b map[string]any) { meta(b)["name"] = 7.0 },
			[]string{"metadata.name: value must be a string"}},
		{"labels not a map", func(b map[string]any) { meta(b)["labels"] = []any{"a"} },
			[]string{"metadata.labels: value must be a map of strings"}},
		{"label value not a string", func(b map[string]any) { meta(b)["labels"] = map[string]any{"team": 1.0} },
			[]string{"metadata.labels.team: value must be a string"}},
		{"annotation value not a string", func(b map[string]any) {
			meta(b)["annotations"] = map[string]any{"example.com/owner": true}
		}, []string{`metadata.annotations["example.com/owner"]: value must be a string`}},
		{"remediationAction not allowed", func(b map[string]any) { spec(b)["remediationAction"] = "sometimes" },
			[]string{`spec.remediationAction: value is not one of the allowed values ["Inform","inform","Enforce","enforce"]`}},
		{"disabled a string", func(b map[string]any) { spec(b)["disabled"] = "yes" },
			[]string{"spec.disabled: value must be a boolean"}},
		{"disabled missing", func(b map[string]any) { delete(spec(b), "disabled") },
			[]string{"spec.disabled: field is required"}},
		{"policy-templates not an array", func(b map[string]any) { spec(b)["policy-templates"] = map[string]any{} },
			[]string{"spec.policy-templates: value must be an array"}},
		{"objectDefinition missing", func(b map[string]any) { delete(template0(b), "objectDefinition") },
			[]string{"spec.policy-templates[0].objectDefinition: field is required"}},
		{"objectDefinition not an object", func(b map[string]any) { template0(b)["objectDefinition"] = "kind: Namespace" },
			[]string{"spec.policy-templates[0].objectDefinition: value must be an object"}},
		{"ignorePending a number", func(b map[string]any) { template0(b)["ignorePending"] = 0.0 },
			[]string{"spec.policy-templates[0].ignorePending: value must be a boolean"}},
		{"dependency compliance not allowed", func(b map[string]any) {
			spec(b)["dependencies"].([]any)[0].(map[string]any)["compliance"] = "Unknown"
		}, []string{"spec.dependencies[0].compliance: value is not one of the allowed values"}},
		{"namespaced ConfigurationPolicy dependency", func(b map[string]any) {
			template0(b)["extraDependencies"].([]any)[0].(map[string]any)["namespace"] = "policies"
		}, []string{`spec.policy-templates[0].extraDependencies[0]: value doesn't match any schema from "oneOf"`, "namespace: maximum string length is 0"}},
		{"spec null", func(b map[string]any) { b["spec"] = nil },
			[]string{"spec: value must not be null"}},
		{"missing spec", func(b map[string]any) { delete(b, "spec") },
			[]string{"spec: field is required"}},
		{"unknown spec field", func(b map[string]any) { spec(b)["remediationActon"] = "enforce" },
			[]string{"spec.remediationActon: unknown field"}},
		{"unknown field in a policy template", func(b map[string]any) { template0(b)["objectDefinitions"] = map[string]any{} },
			[]string{"spec.policy-templates[0].objectDefinitions: unknown field"}},
		{"unknown field in hubTemplateOptions", func(b map[string]any) {
			spec(b)["hubTemplateOptions"] = map[string]any{"serviceAccount": "sa"}
		}, []string{"spec.hubTemplateOptions.serviceAccount: unknown field"}},
		{"several errors at once", func(b map[string]any) {
			b["kind"] = "Polcy"
			meta(b)["name"] = "Bad_Name"
			spec(b)["disabled"] = "yes"
			spec(b)["remediationAction"] = "sometimes"
			spec(b)["remediationActon"] = "enforce"
		}, []string{
			`kind: must be "Policy"`,
			"metadata.name: a lowercase RFC 1123 subdomain",
			"spec.disabled: value must be a boolean",
			"spec.remediationAction: value is not one of the allowed values",
			"spec.remediationActon: unknown field",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			body := validPolicy(t)
			tc.mutate(body)
			err := v.ValidatePolicy(body)
			g.Expect(err).To(gomega.HaveOccurred())
			g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodePolicyInvalid), "error: %v", err)
			msg := err.Error()
			last := -1
			for _, w := range tc.want {
				g.Expect(msg).To(gomega.ContainSubstring(w))
				at := strings.Index(msg, w)
				g.Expect(at).To(gomega.BeNumerically(">", last), "problems are listed in path order: %s", msg)
				last = at
			}
			g.Expect(v.ValidatePolicy(body)).To(gomega.MatchError(msg), "the message is deterministic")
		})
	}
}

func TestManyProblemsAreCapped(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	v := newValidator(t)
	body := validPolicy(t)
	for i := range 15 {
		spec(body)[fmt.Sprintf("unknown%02d", i)] = true
	}
	err := v.ValidatePolicy(body)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodePolicyInvalid))
	g.Expect(strings.Count(err.Error(), "unknown field")).To(gomega.Equal(10))
	g.Expect(err.Error()).To(gomega.HavePrefix("spec.unknown00: unknown field; spec.unknown01: unknown field;"))
	g.Expect(err.Error()).To(gomega.HaveSuffix("; and 5 more"))
}

func TestNilBody(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	err := newValidator(t).ValidatePolicy(nil)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodePolicyInvalid))
	g.Expect(err.Error()).To(gomega.ContainSubstring("metadata: field is required"))
	g.Expect(err.Error()).To(gomega.ContainSubstring("spec: field is required"))
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	valid := validPolicy(t)
	invalid := validPolicy(t)
	spec(invalid)["disabled"] = "yes"
	spec(invalid)["remediationAction"] = "sometimes"
	want := v.ValidatePolicy(invalid)
	if want == nil {
		t.Fatal("the invalid policy passed")
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if err := v.ValidatePolicy(valid); err != nil {
					errs <- fmt.Errorf("valid policy: %w", err)
					return
				}
				if err := v.ValidatePolicy(invalid); err == nil || err.Error() != want.Error() {
					errs <- fmt.Errorf("invalid policy: got %v, want %v", err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !reflect.DeepEqual(valid, validPolicy(t)) {
		t.Error("validation changed the shared body")
	}
}

// leaked is a submitted value no message may repeat.
const leaked = "leaked-value-4e1f"

// TestEveryPolicySchemaFailureIsRecognised feeds every kind of failure the Policy
// CRD's schema can report: each must be one the package renders from the
// schema, not an unknown rule, and no message may repeat the value. A new
// CRD version with a rule no case here fails covers it.
func TestEveryPolicySchemaFailureIsRecognised(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	covered := map[string]bool{}
	for _, tc := range []struct {
		name   string
		mutate func(body map[string]any)
		want   string
	}{
		{"type", func(b map[string]any) { spec(b)["disabled"] = leaked }, "spec.disabled: value must be a boolean"},
		{"nullable", func(b map[string]any) { spec(b)["disabled"] = nil }, "spec.disabled: value must not be null"},
		{"enum", func(b map[string]any) { spec(b)["remediationAction"] = leaked },
			`spec.remediationAction: value is not one of the allowed values ["Inform","inform","Enforce","enforce"]`},
		{"required", func(b map[string]any) { delete(spec(b), "disabled") }, "spec.disabled: field is required"},
		{"properties", func(b map[string]any) { spec(b)["remediationActon"] = leaked }, "spec.remediationActon: unknown field"},
		{"oneOf, maxLength and not", func(b map[string]any) {
			template0(b)["extraDependencies"].([]any)[0].(map[string]any)["namespace"] = leaked
		}, `spec.policy-templates[0].extraDependencies[0]: value doesn't match any schema from "oneOf" (branch 1: namespace: ` +
			`maximum string length is 0; branch 2: value must not match the "not" schema)`},
		{"format", func(b map[string]any) {
			b["status"] = map[string]any{"details": []any{map[string]any{"history": []any{map[string]any{"lastTimestamp": leaked}}}}}
		}, `status.details[0].history[0].lastTimestamp: string doesn't match the format "date-time"`},
	} {
		body := validPolicy(t)
		tc.mutate(body)
		fields, unrecognised := v.SchemaFailures(body)
		if len(fields) == 0 {
			t.Errorf("%s: the schema reported no failure", tc.name)
		}
		if len(unrecognised) > 0 {
			t.Errorf("%s: kin-openapi reported rules this package does not render: %v", tc.name, unrecognised)
		}
		for _, f := range fields {
			covered[f] = true
		}
		msg := fmt.Sprint(v.ValidatePolicy(body))
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, leaked) {
			t.Errorf("%s: got %q, want it to contain %q and not the submitted value", tc.name, msg, tc.want)
		}
	}
	for _, r := range v.SchemaRules() {
		if !covered[r] {
			t.Errorf("the Policy CRD's schema has a %q rule no case here fails: add one", r)
		}
	}
}

func TestAnUnknownPolicySchemaRuleIsNamedWithoutTheValue(t *testing.T) {
	t.Parallel()
	got := policyschema.Rule(&openapi3.SchemaError{
		Value: leaked, SchemaField: "multipleOf", Schema: &openapi3.Schema{}, Reason: "value " + leaked + " is odd",
	})
	if want := `value does not satisfy the schema's "multipleOf" rule`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
