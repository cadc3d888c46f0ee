package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestPatchPolicy changes a policy by PATCH, as clusters are changed: the
// placement alone keeps the body, the body alone keeps the placement, a
// stale If-Match answers 412, an empty or unknown field 400, a body the
// Policy CRD refuses 400 code 26, and another organisation's policy 404.
func TestPatchPolicy(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	e := newStackEnv(t, flavours()[0])
	tok := bearer(e.userToken(t, "org-patch", "alice"))
	created, err := e.client.CreatePolicyWithResponse(ctx, public.PolicyCreate{Zone: ptr("eu"), Policy: apiPolicy("audit", "inform"),
		Placement: prodPlacement()}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created.JSON201).NotTo(gomega.BeNil(), outcome(created, err))
	id := created.JSON201.Id

	staging := public.PolicyPlacement{LabelSelector: public.LabelSelector{MatchLabels: &map[string]string{"env": "staging"}}}
	placed, err := e.client.PatchPolicyWithResponse(ctx, id, nil, public.PolicyPatch{Placement: &staging}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(placed.JSON200).NotTo(gomega.BeNil(), outcome(placed, err))
	g.Expect(placed.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(`"2"`))
	g.Expect(*placed.JSON200.Placement.LabelSelector.MatchLabels).To(gomega.Equal(map[string]string{"env": "staging"}))
	g.Expect(placed.JSON200.Policy["spec"]).To(gomega.HaveKeyWithValue("remediationAction", "inform"), "the body is kept")

	stale, err := e.client.PatchPolicyWithResponse(ctx, id, &public.PatchPolicyParams{IfMatch: ptr(`"1"`)},
		public.PolicyPatch{Policy: ptr(apiPolicy("audit", "enforce"))}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "PatchPolicy(stale If-Match)", e.apiEnv, stale.JSON412, stale.StatusCode(), http.StatusPreconditionFailed, fleet.CodePreconditionFailed)

	enforced, err := e.client.PatchPolicyWithResponse(ctx, id, &public.PatchPolicyParams{IfMatch: ptr(`"2"`)},
		public.PolicyPatch{Policy: ptr(apiPolicy("audit", "enforce"))}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(enforced.JSON200).NotTo(gomega.BeNil(), outcome(enforced, err))
	g.Expect(enforced.JSON200.Policy["spec"]).To(gomega.HaveKeyWithValue("remediationAction", "enforce"))
	g.Expect(*enforced.JSON200.Placement.LabelSelector.MatchLabels).To(gomega.Equal(map[string]string{"env": "staging"}), "the placement is kept")
	g.Expect(enforced.JSON200.Generation).To(gomega.Equal(int64(3)))

	got, err := e.client.GetPolicyWithResponse(ctx, id, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.JSON200).NotTo(gomega.BeNil(), outcome(got, err))
	g.Expect(got.JSON200.Policy["spec"]).To(gomega.HaveKeyWithValue("remediationAction", "enforce"))
	g.Expect(got.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(`"3"`))

	for _, tc := range []struct{ name, body string }{
		{"no field", `{}`},
		{"an unknown field", `{"zone":"us"}`},
	} {
		resp, err := e.client.PatchPolicyWithBodyWithResponse(ctx, id, nil, "application/json", strings.NewReader(tc.body), tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "PatchPolicy("+tc.name+")", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	}
	bad := apiPolicy("audit", "inform")
	bad["spec"].(map[string]any)["remediationAction"] = "sometimes"
	refused, err := e.client.PatchPolicyWithResponse(ctx, id, nil, public.PolicyPatch{Policy: &bad}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "PatchPolicy(a body the CRD refuses)", e.apiEnv, refused.JSON400, refused.StatusCode(), http.StatusBadRequest, fleet.CodePolicyInvalid)

	other, err := e.client.PatchPolicyWithResponse(ctx, id, nil, public.PolicyPatch{Placement: &staging}, bearer(e.userToken(t, "org-other", "bob")))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "PatchPolicy(another organisation's)", e.apiEnv, other.JSON404, other.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
}
