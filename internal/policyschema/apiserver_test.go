package policyschema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// nested returns levels of objects and arrays in turn, an object outermost
// and the innermost one empty: nested(1) is {}, nested(2) {"x": []}.
func nested(levels int) any {
	var v any
	for k := levels; k >= 1; k-- {
		switch {
		case k%2 == 0 && v == nil:
			v = []any{}
		case k%2 == 0:
			v = []any{v}
		case v == nil:
			v = map[string]any{}
		default:
			v = map[string]any{"x": v}
		}
	}
	return v
}

// TestWhatTheHubsAPIServerRefuses: a body the hub's API server would refuse
// (or that would nest its desired set beyond what the decoders take) is
// refused here, naming the field and never the value at fault.
func TestWhatTheHubsAPIServerRefuses(t *testing.T) {
	t.Parallel()
	v := newValidator(t)
	const marker = "s3cr3t"
	// The policy body is level 1, spec 2, policy-templates 3, the template 4
	// and its objectDefinition 5.
	atDepth := func(levels int) func(b map[string]any) {
		return func(b map[string]any) { template0(b)["objectDefinition"] = nested(levels - 4) }
	}
	bigAnnotations := func(size int) func(b map[string]any) {
		return func(b map[string]any) {
			meta(b)["annotations"] = map[string]any{"example.com/" + marker: strings.Repeat("a", size-len("example.com/"+marker))}
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(b map[string]any)
		want   string // "" when the body is valid
	}{
		{"nested to the bound", atDepth(fleet.MaxObjectDepth), ""},
		{"nested one level beyond", atDepth(fleet.MaxObjectDepth + 1), "(body): objects and arrays may nest at most 100 levels deep"},
		{"nested 10,000 levels", atDepth(10_000), "(body): objects and arrays may nest at most 100 levels deep"},
		{"at the size bound", func(b map[string]any) {
			meta(b)["annotations"] = map[string]any{}
			template0(b)["objectDefinition"] = map[string]any{"data": ""}
			size := len(mustJSON(t, b))
			template0(b)["objectDefinition"] = map[string]any{"data": strings.Repeat("x", fleet.MaxPolicyBodyBytes-size)}
		}, ""},
		{"beyond the size bound", func(b map[string]any) {
			template0(b)["objectDefinition"] = map[string]any{"data": marker + strings.Repeat("x", fleet.MaxPolicyBodyBytes)}
		}, "(body): may not be more than 524288 bytes as JSON"},
		{"annotation key with a space", func(b map[string]any) { meta(b)["annotations"] = map[string]any{marker + " key": "v"} },
			"metadata.annotations: a key is not a qualified name"},
		{"annotation key with two slashes", func(b map[string]any) { meta(b)["annotations"] = map[string]any{"a/b/" + marker: "v"} },
			"metadata.annotations: a key is not a qualified name"},
		{"annotation key in upper case", func(b map[string]any) { meta(b)["annotations"] = map[string]any{"Example.COM/" + marker: "v"} }, ""},
		{"annotations at 256 KiB", bigAnnotations(apivalidation.TotalAnnotationSizeLimitB), ""},
		{"annotations over 256 KiB", bigAnnotations(apivalidation.TotalAnnotationSizeLimitB + 1),
			"metadata.annotations: keys and values together may not be more than 262144 bytes"},
		{"label key not a qualified name", func(b map[string]any) { meta(b)["labels"] = map[string]any{marker + "!": "v"} },
			"metadata.labels: a key is not a qualified name"},
		{"label value too long", func(b map[string]any) { meta(b)["labels"] = map[string]any{"team": strings.Repeat(marker, 11)} },
			"metadata.labels.team: must be no more than 63 bytes"},
		{"label value with a space", func(b map[string]any) { meta(b)["labels"] = map[string]any{"team": marker + " x"} },
			"metadata.labels.team: a valid label must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			body := validPolicy(t)
			tc.mutate(body)
			err := v.ValidatePolicy(body)
			if tc.want == "" {
				g.Expect(err).NotTo(gomega.HaveOccurred())
				return
			}
			g.Expect(err).To(gomega.HaveOccurred())
			g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodePolicyInvalid), "error: %v", err)
			g.Expect(err.Error()).To(gomega.ContainSubstring(tc.want))
			g.Expect(err.Error()).NotTo(gomega.ContainSubstring(marker), "the error repeats the value at fault")
		})
	}
}

// TestFleetLabelRulesMatchTheAPIServers keeps the domain package's
// hand-written label rules, which registrations' and selectors' labels go
// through, in step with apimachinery's, which the hubs' API servers run.
func TestFleetLabelRulesMatchTheAPIServers(t *testing.T) {
	t.Parallel()
	keys := []string{
		"", "a", "env", "Env_1.x-y", "app.kubernetes.io/name", "example.com/tier-1", "a-b.c1/x",
		strings.Repeat("k", 63), strings.Repeat("k", 64), strings.Repeat("p", 253) + "/x", strings.Repeat("p", 254) + "/x",
		strings.Repeat("p", 63) + "." + strings.Repeat("q", 63) + "/x", strings.Repeat("p", 64) + ".example.com/x",
		"-env", "env-", ".env", "_env", "env_", "en v", "env:x", "/x", "example.com/", "Example.com/x", "example_com/x",
		"-example.com/x", "example.com-/x", "example..com/x", "a/b/c", "a//b", "x/" + strings.Repeat("n", 64), "é", "env\x00",
	}
	for _, k := range keys {
		want := len(validation.IsQualifiedName(k)) == 0
		if got := fleet.ValidateLabelKey(k) == nil; got != want {
			t.Errorf("ValidateLabelKey(%q) accepts = %v, apimachinery's IsQualifiedName accepts = %v", k, got, want)
		}
	}
	values := []string{
		"", "prod", "A.b_c-9", strings.Repeat("v", 63), strings.Repeat("v", 64), "-prod", "prod-", "prod_", ".prod",
		"pr od", "prod/1", "prod:1", "é", "v\x00",
	}
	for _, v := range values {
		want := len(validation.IsValidLabelValue(v)) == 0
		if got := fleet.ValidateLabels(map[string]string{"env": v}) == nil; got != want {
			t.Errorf("ValidateLabels({env: %q}) accepts = %v, apimachinery's IsValidLabelValue accepts = %v", v, got, want)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return raw
}
