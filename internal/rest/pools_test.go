package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// apiBlueprint is a blueprint with a fixed infra pool and a workers pool
// the pool manager sizes from 2 to 6 nodes.
func apiBlueprint(release string) public.BlueprintSpec {
	return public.BlueprintSpec{Release: release, ControlPlaneSize: public.SizeMedium, MachinePools: []public.MachinePool{
		{Name: "infra", Size: public.SizeSmall, Replicas: ptr(2)},
		{Name: "workers", Size: public.SizeLarge, Autoscaling: &struct {
			MaxReplicas int `json:"max_replicas"`
			MinReplicas int `json:"min_replicas"`
		}{MaxReplicas: 6, MinReplicas: 2}},
	}}
}

// TestCapacityPoolAPI drives a pool through the public API with the
// reconcilers running and the hub's agent played by the test: the pool
// comes up, bookings fill its fullest cluster, the scaler raises the
// cluster's MachinePool in the hub's desired set, a booking with no room is
// refused, and the pool's deletion deprovisions its clusters.
func TestCapacityPoolAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			testCapacityPoolAPI(t, newStackEnv(t, f))
		})
	}
}

func testCapacityPoolAPI(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	hub := e.createAgentHub(t, "hub-eu", "eu", 10)
	agent := agentAuth(e.agentToken(t, deref(hub.AgentIdentity)))
	tok := bearer(e.userToken(t, "org-a", "alice"))

	// A blueprint the domain refuses names the field; a valid one is version 1.
	bad := apiBlueprint("4.16.3")
	bad.MachinePools[0].Autoscaling = bad.MachinePools[1].Autoscaling
	badResp, err := e.client.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "kafka", Spec: bad}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateBlueprint(both)", e.apiEnv, badResp.JSON400, badResp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	bpResp, err := e.client.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "kafka", Spec: apiBlueprint("4.16.3")}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(bpResp.JSON201).NotTo(gomega.BeNil(), outcome(bpResp, err))
	bp := *bpResp.JSON201
	g.Expect(bp.LatestVersion).To(gomega.Equal(1))
	g.Expect(bp.Href).To(gomega.Equal(e.http.BasePath + "/blueprints/" + bp.Id))
	// An arm64 blueprint keeps its architecture; a deployment without a GCP
	// project refuses a pool on GCP, which the installer could not install.
	armSpec := apiBlueprint("4.16.3")
	armSpec.Architecture = ptr(public.Arm64)
	armResp, err := e.client.CreateBlueprintWithResponse(ctx, public.BlueprintCreate{Name: "kafka-arm", Spec: armSpec}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(armResp.JSON201).NotTo(gomega.BeNil(), outcome(armResp, err))
	g.Expect(armResp.JSON201.Spec.Architecture).To(gomega.HaveValue(gomega.Equal(public.Arm64)))
	gcpResp, err := e.client.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: "kafka-gcp", BlueprintId: bp.Id,
		BlueprintVersion: 1, Cloud: public.CloudGCP, Region: "europe-west1", Zone: ptr("eu"), MinClusters: 0, MaxClusters: 1,
		UnitsPerCluster: 60, Credentials: public.PoolCredentials{Cloud: map[string]string{"osServiceAccount.json": "{}"}, PullSecret: `{"auths":{}}`}}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateCapacityPool(gcp)", e.apiEnv, gcpResp.JSON400, gcpResp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)

	poolResp, err := e.client.CreateCapacityPoolWithResponse(ctx, public.CapacityPoolCreate{Name: "kafka-eu", BlueprintId: bp.Id,
		BlueprintVersion: 1, Cloud: public.CloudAWS, Region: "eu-west-1", Zone: ptr("eu"), MinClusters: 2, MaxClusters: 3,
		UnitsPerCluster: 60, Credentials: public.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "AKIA", "aws_secret_access_key": "s3cr3t"},
			PullSecret: `{"auths":{}}`}}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(poolResp.JSON201).NotTo(gomega.BeNil(), outcome(poolResp, err))
	pool := *poolResp.JSON201
	g.Expect(string(poolResp.Body)).NotTo(gomega.ContainSubstring("s3cr3t"), "credentials are write-only")
	other, err := e.client.GetCapacityPoolWithResponse(ctx, pool.Id, bearer(e.userToken(t, "org-b", "bob")))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(other.StatusCode()).To(gomega.Equal(http.StatusNotFound), "another organisation's pool")

	// The pool manager makes the minimum; provisioning_mgr places it on the
	// hub, ready once its agent reports.
	e.heartbeat(t, hub, 0)
	e.startReconcilers(t)
	clusters := func() []public.PoolCluster {
		resp, err := e.client.ListCapacityPoolClustersWithResponse(ctx, pool.Id, &public.ListCapacityPoolClustersParams{OrderBy: ptr("name")}, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), outcome(resp, err))
		return resp.JSON200.Items
	}
	g.Eventually(func() int {
		n := 0
		for _, c := range clusters() {
			if c.Hub != nil && c.Hub.Id == hub.Id {
				n++
			}
		}
		return n
	}, 20*time.Second, 100*time.Millisecond).Should(gomega.Equal(2))

	// The hub's agent applies them and reports them joined and available.
	e.ackAll(t, hub)
	var items []private.RegistrationStatus
	now := time.Now()
	for _, c := range clusters() {
		items = append(items, private.RegistrationStatus{RegistrationId: c.Id, Conditions: []private.Condition{
			{Type: fleet.ConditionJoined, Status: private.True, Reason: "Joined", LastTransitionTime: now},
			{Type: fleet.ConditionAvailable, Status: private.True, Reason: "Available", LastTransitionTime: now}}})
	}
	st, err := e.agent.PutRegistrationsStatusWithResponse(ctx, hub.Id, private.RegistrationStatusBatch{Items: items}, agent)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(st.JSON200).NotTo(gomega.BeNil(), outcome(st, err))
	g.Eventually(func() []public.PoolClusterState {
		var out []public.PoolClusterState
		for _, c := range clusters() {
			out = append(out, c.State)
		}
		return out
	}, 20*time.Second, 100*time.Millisecond).Should(gomega.Equal([]public.PoolClusterState{public.PoolClusterReady, public.PoolClusterReady}))
	g.Eventually(func() public.CapacityPoolPhase {
		resp, err := e.client.GetCapacityPoolWithResponse(ctx, pool.Id, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), outcome(resp, err))
		return resp.JSON200.Phase
	}, 20*time.Second, 100*time.Millisecond).Should(gomega.Equal(public.CapacityPoolReady), "the pool's minimum is ready")

	// Bookings fill the fullest cluster; past its node threshold the scaler
	// raises its workers, and the hub's desired set carries them.
	book := func(units int) *public.CreateReservationResponse {
		resp, err := e.client.CreateReservationWithResponse(ctx, pool.Id, public.ReservationCreate{Units: units, InstanceId: ptr("kafka-x")}, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return resp
	}
	first, second := book(10), book(8)
	g.Expect(first.JSON201).NotTo(gomega.BeNil(), outcome(first, nil))
	g.Expect(second.JSON201).NotTo(gomega.BeNil(), outcome(second, nil))
	g.Expect(second.JSON201.ClusterId).To(gomega.Equal(first.JSON201.ClusterId))
	g.Eventually(func() int {
		for _, c := range clusters() {
			for _, mp := range c.MachinePools {
				if c.Id == first.JSON201.ClusterId && mp.Name == "workers" {
					return mp.Replicas
				}
			}
		}
		return 0
	}, 20*time.Second, 100*time.Millisecond).Should(gomega.Equal(3))
	g.Eventually(func() any {
		resp, err := e.agent.GetHubDesiredWithResponse(ctx, hub.Id, nil, agent)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), outcome(resp, err))
		for _, r := range resp.JSON200.Registrations {
			for _, raw := range r.Objects {
				var o struct {
					Kind string
					Spec struct {
						Name     string
						Replicas int
					}
				}
				g.Expect(json.Unmarshal(raw, &o)).To(gomega.Succeed())
				if r.RegistrationId == first.JSON201.ClusterId && o.Kind == "MachinePool" && o.Spec.Name == "workers" {
					return o.Spec.Replicas
				}
			}
		}
		return nil
	}, 20*time.Second, 100*time.Millisecond).Should(gomega.BeEquivalentTo(3))
	events, err := e.client.ListCapacityPoolEventsWithResponse(ctx, pool.Id, &public.ListCapacityPoolEventsParams{Search: ptr("type = 'NodesScaledUp'")}, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(events.JSON200).NotTo(gomega.BeNil(), outcome(events, err))
	g.Expect(events.JSON200.Items).NotTo(gomega.BeEmpty())
	g.Expect(events.JSON200.Items[0].Reason).To(gomega.Equal("ThresholdReached"))

	// No cluster has room for 61 units.
	full := book(61)
	wantError(t, "CreateReservation(61)", e.apiEnv, full.JSON409, full.StatusCode(), http.StatusConflict, fleet.CodeCapacityExhausted)
	// A pool cluster is the pool's to remove.
	dereg, err := e.client.DeleteClusterWithResponse(ctx, first.JSON201.ClusterId, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(dereg.StatusCode()).To(gomega.Equal(http.StatusConflict))

	// Deleting the pool waits for its reservations, then deprovisions it.
	del, err := e.client.DeleteCapacityPoolWithResponse(ctx, pool.Id, nil, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteCapacityPool(held)", e.apiEnv, del.JSON409, del.StatusCode(), http.StatusConflict, fleet.CodeConflict)
	for _, r := range []*public.CreateReservationResponse{first, second} {
		rel, err := e.client.DeleteReservationWithResponse(ctx, pool.Id, r.JSON201.Id, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(rel.StatusCode()).To(gomega.Equal(http.StatusNoContent))
	}
	del, err = e.client.DeleteCapacityPoolWithResponse(ctx, pool.Id, nil, tok)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusAccepted))
	// The agent applies the withdrawals; the pool goes with its last cluster.
	g.Eventually(func() int {
		e.ackAll(t, hub)
		resp, err := e.client.GetCapacityPoolWithResponse(ctx, pool.Id, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return resp.StatusCode()
	}, 30*time.Second, 200*time.Millisecond).Should(gomega.Equal(http.StatusNotFound))
}
