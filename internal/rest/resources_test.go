package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func policyBatch(generation int64, full, last bool, objects ...private.ResourceObject) private.ResourceBatch {
	return private.ResourceBatch{Group: "policy.open-cluster-management.io", Kind: "Policy", Generation: generation,
		Full: full, Last: last, Upserts: append([]private.ResourceObject{}, objects...), Deletes: []string{}}
}

func policyReport(ns, name string) private.ResourceObject {
	return private.ResourceObject{Namespace: ptr(ns), Name: name, Uid: ptr("uid-" + name), ResourceVersion: ptr("1"),
		Generation: ptr(int64(1)), Labels: &map[string]string{"env": "prod"},
		Body: map[string]any{"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
			"metadata": map[string]any{"namespace": ns, "name": name, "labels": map[string]any{"env": "prod"}},
			"spec":     map[string]any{"disabled": false, "remediationAction": "inform"}}}
}

// TestResourcesAPI drives the generic path's endpoints: the kinds an agent
// syncs, its batches (its own hub only), and the administrators' list.
func TestResourcesAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newStackEnv(t, f)
			hubA, hubB := e.createAgentHub(t, "res-a", "eu", 2), e.createAgentHub(t, "res-b", "eu", 2)
			tokA := agentAuth(e.agentToken(t, "res-a-agent"))

			kinds, err := e.agent.GetHubResourceKindsWithResponse(ctx, hubA.Id, tokA)
			if err != nil || kinds.JSON200 == nil || len(kinds.JSON200.Items) != len(fleet.SyncedResourceKinds()) {
				t.Fatalf("GetHubResourceKinds(own hub) = %s; want every synced kind", outcome(kinds, err))
			}
			foreign, err := e.agent.GetHubResourceKindsWithResponse(ctx, hubB.Id, tokA)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, "GetHubResourceKinds(another hub)", e.apiEnv, fromPrivate(foreign.JSON404), foreign.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)

			batch := policyBatch(0, false, false, policyReport("ns-1", "p1"), policyReport("ns-2", "p2"))
			ack, err := e.agent.PostHubResourcesWithResponse(ctx, hubA.Id, batch, tokA)
			if err != nil || ack.JSON200 == nil || ack.JSON200.Written != 2 || ack.JSON200.ContentHashes["ns-1/p1"] == "" {
				t.Fatalf("PostHubResources(2 policies) = %s; want 2 written, their hashes by key", outcome(ack, err))
			}
			present := []private.PresentObject{{Key: "ns-1/p1", ContentHash: ack.JSON200.ContentHashes["ns-1/p1"]}}
			resync := policyBatch(7, true, true)
			resync.Present = &present
			ack, err = e.agent.PostHubResourcesWithResponse(ctx, hubA.Id, resync, tokA)
			if err != nil || ack.JSON200 == nil || ack.JSON200.Confirmed != 1 || ack.JSON200.Tombstoned != 1 {
				t.Fatalf("PostHubResources(resync with p1 present) = %s; want p1 confirmed, p2 tombstoned", outcome(ack, err))
			}
			intruder, err := e.agent.PostHubResourcesWithResponse(ctx, hubB.Id, batch, tokA)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, "PostHubResources(another hub)", e.apiEnv, fromPrivate(intruder.JSON404), intruder.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
			mc := batch
			mc.Group, mc.Kind = "cluster.open-cluster-management.io", "ManagedCluster"
			refused, err := e.agent.PostHubResourcesWithResponse(ctx, hubA.Id, mc, tokA)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, "PostHubResources(ManagedCluster)", e.apiEnv, fromPrivate(refused.JSON400), refused.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)

			for _, tok := range []string{e.adminToken(t), e.viewerToken(t)} {
				list, err := e.admin.ListResourcesWithResponse(ctx, &admin.ListResourcesParams{Kind: "policies", HubId: &hubA.Id,
					Search: ptr("labels.env = 'prod' and remediation_action = 'inform'")}, adminAuth(tok))
				if err != nil || list.JSON200 == nil || list.JSON200.Total != 1 || list.JSON200.Items[0].Name != "p1" {
					t.Fatalf("ListResources(policies of hub A) = %s; want p1 only", outcome(list, err))
				}
				if it := list.JSON200.Items[0]; it.Namespace != "ns-1" || it.HubName != "res-a" || it.Zone != "eu" || it.ObjectKind != "Policy" {
					t.Errorf("ListResources(): item %+v, want ns-1, res-a, eu, Policy", it)
				}
			}
			user, err := e.admin.ListResourcesWithResponse(ctx, &admin.ListResourcesParams{Kind: "policies"}, adminAuth(e.userToken(t, "org-1", "alice")))
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, "ListResources(a user)", e.apiEnv, fromAdmin(user.JSON403), user.StatusCode(), http.StatusForbidden, fleet.CodeAdminRoleRequired)
			for _, tc := range []struct {
				call   string
				params admin.ListResourcesParams
				code   fleet.ErrorCode
			}{
				{"an unknown kind", admin.ListResourcesParams{Kind: "secrets"}, fleet.CodeValidation},
				{"ManagedCluster", admin.ListResourcesParams{Kind: "ManagedCluster"}, fleet.CodeValidation},
				{"a field of another kind", admin.ListResourcesParams{Kind: "policies", Search: ptr("console_url = 'x'")}, fleet.CodeBadSearch},
			} {
				resp, err := e.admin.ListResourcesWithResponse(ctx, &tc.params, adminAuth(e.adminToken(t)))
				if err != nil {
					t.Fatal(err)
				}
				wantError(t, "ListResources("+tc.call+")", e.apiEnv, fromAdmin(resp.JSON400), resp.StatusCode(), http.StatusBadRequest, tc.code)
			}
		})
	}
}
