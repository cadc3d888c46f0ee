package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestOrganizationLimitsAPI: an organisation at its limit of pools is
// refused a pool with 409 PoolQuotaExceeded naming the limit; an
// administrator raises that organisation's limit through the admin API,
// which changes no other organisation's, and gives it back its default.
func TestOrganizationLimitsAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			cfg := testStoreConfig()
			cfg.Pools.Limits = fleet.OrgLimits{Pools: 1, PoolClusters: 6}
			testOrganizationLimitsAPI(t, newStackEnvWith(t, f, cfg))
		})
	}
}

func testOrganizationLimitsAPI(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	alice, bob := bearer(e.userToken(t, "org-a", "alice")), bearer(e.userToken(t, "org-b", "bob"))
	sre, viewer := adminAuth(e.adminToken(t)), adminAuth(e.viewerToken(t))
	errorOf := func(body []byte) (code, reason string) {
		var out struct{ Code, Reason string }
		_ = json.Unmarshal(body, &out)
		return out.Code, out.Reason
	}
	codeName := func(c fleet.ErrorCode) string { return fmt.Sprintf("%s-%d", e.http.ErrorCodePrefix, c) }
	createPool := func(tok public.RequestEditorFn, bp, name string) *public.CreateCapacityPoolResponse {
		t.Helper()
		resp, err := e.client.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: name, BlueprintId: bp, BlueprintVersion: 1,
			Cloud: public.CloudAWS, Region: "eu-west-1", Zone: ptr("eu"), MinClusters: 0, MaxClusters: 2, UnitsPerCluster: 60,
			Credentials: public.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "AKIA"}, PullSecret: `{"auths":{}}`}}, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return resp
	}
	blueprint := func(tok public.RequestEditorFn) string {
		t.Helper()
		resp, err := e.client.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "kafka", Spec: apiBlueprint("4.16.3")}, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON201).NotTo(gomega.BeNil(), outcome(resp, err))
		return resp.JSON201.Id
	}
	expectAtLimit := func(resp *public.CreateCapacityPoolResponse, what string) {
		t.Helper()
		g.Expect(resp.StatusCode()).To(gomega.Equal(http.StatusConflict), what)
		code, reason := errorOf(resp.Body)
		g.Expect(code).To(gomega.Equal(codeName(fleet.CodePoolQuotaExceeded)), what)
		g.Expect(reason).To(gomega.ContainSubstring(fleet.LimitMaxPools), what)
		g.Expect(reason).NotTo(gomega.MatchRegexp(`[0-9]`), what+": the limit, not its value")
	}
	bpA, bpB := blueprint(alice), blueprint(bob)
	g.Expect(createPool(alice, bpA, "p-1").StatusCode()).To(gomega.Equal(http.StatusCreated))
	expectAtLimit(createPool(alice, bpA, "p-2"), "org-a's second pool at the default limit")

	// Only administrators read and change limits.
	got, err := e.admin.GetOrganizationLimitsWithResponse(ctx, "org-a", admin.RequestEditorFn(alice))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.StatusCode()).To(gomega.Equal(http.StatusForbidden))
	got, err = e.admin.GetOrganizationLimitsWithResponse(ctx, "org-a", viewer)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.JSON200).NotTo(gomega.BeNil(), outcome(got, err))
	g.Expect(got.JSON200.Href).To(gomega.Equal(e.http.BasePath + "/admin/organizations/org-a/limits"))
	g.Expect(got.JSON200.Limits).To(gomega.Equal(admin.OrgLimitValues{MaxPools: 1, MaxPoolClusters: 6}))
	g.Expect(got.JSON200.Overrides).To(gomega.Equal(admin.OrgLimitOverrides{}))
	g.Expect(got.JSON200.Usage).To(gomega.Equal(admin.OrgUsage{Pools: 1}))
	patch := func(auth admin.RequestEditorFn, org, body string) *admin.UpdateOrganizationLimitsResponse {
		t.Helper()
		resp, err := e.admin.UpdateOrganizationLimitsWithBodyWithResponse(ctx, org, "application/json", strings.NewReader(body), auth)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return resp
	}
	g.Expect(patch(viewer, "org-a", `{"max_pools": 2}`).StatusCode()).To(gomega.Equal(http.StatusForbidden), "a viewer reads only")

	raised := patch(sre, "org-a", `{"max_pools": 2, "max_reserved_units": 500}`)
	g.Expect(raised.JSON200).NotTo(gomega.BeNil(), outcome(raised, nil))
	g.Expect(raised.JSON200.Limits).To(gomega.Equal(admin.OrgLimitValues{MaxPools: 2, MaxPoolClusters: 6, MaxReservedUnits: 500}))
	g.Expect(raised.JSON200.Overrides.MaxPools).To(gomega.HaveValue(gomega.BeEquivalentTo(2)))
	g.Expect(raised.JSON200.Overrides.MaxPoolClusters).To(gomega.BeNil(), "not overridden")
	g.Expect(raised.JSON200.UpdatedBy).To(gomega.HaveValue(gomega.Equal("sre-admin")))
	g.Expect(createPool(alice, bpA, "p-2").StatusCode()).To(gomega.Equal(http.StatusCreated), "org-a's override lets it have a second pool")
	expectAtLimit(createPool(alice, bpA, "p-3"), "org-a's third pool")

	// The other tenant keeps the default.
	g.Expect(createPool(bob, bpB, "p-1").StatusCode()).To(gomega.Equal(http.StatusCreated))
	expectAtLimit(createPool(bob, bpB, "p-2"), "org-b's second pool: org-a's override is org-a's")
	other, err := e.admin.GetOrganizationLimitsWithResponse(ctx, "org-b", sre)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(other.JSON200).NotTo(gomega.BeNil(), outcome(other, err))
	g.Expect(other.JSON200.Limits).To(gomega.Equal(admin.OrgLimitValues{MaxPools: 1, MaxPoolClusters: 6}))
	g.Expect(other.JSON200.UpdatedAt).To(gomega.BeNil())

	// Refused values name the field, never the value; null resets.
	bad := patch(sre, "org-a", `{"max_pools": -7}`)
	g.Expect(bad.StatusCode()).To(gomega.Equal(http.StatusBadRequest))
	// The reason is where a value would be echoed; the whole body also
	// holds a random operation id, which may contain any short string.
	var refusal struct{ Reason string }
	g.Expect(json.Unmarshal(bad.Body, &refusal)).To(gomega.Succeed())
	g.Expect(refusal.Reason).To(gomega.ContainSubstring("max_pools"))
	g.Expect(refusal.Reason).NotTo(gomega.ContainSubstring("-7"))
	g.Expect(patch(sre, "org-a", `{}`).StatusCode()).To(gomega.Equal(http.StatusBadRequest), "a patch names at least one limit")
	reset := patch(sre, "org-a", `{"max_pools": null}`)
	g.Expect(reset.JSON200).NotTo(gomega.BeNil(), outcome(reset, nil))
	g.Expect(reset.JSON200.Overrides.MaxPools).To(gomega.BeNil())
	g.Expect(reset.JSON200.Limits).To(gomega.Equal(admin.OrgLimitValues{MaxPools: 1, MaxPoolClusters: 6, MaxReservedUnits: 500}))
	g.Expect(reset.JSON200.Usage.Pools).To(gomega.Equal(2), "a lower limit removes nothing")
}
