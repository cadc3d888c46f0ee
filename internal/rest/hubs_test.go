package rest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// hubSecret is a SyncSet credential; no response body may ever carry it.
const hubSecret = "hub-secret-0c8f2e61b7"

// TestHubs drives the admin API's hub register under each flavour.
func TestHubs(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newStackEnv(t, f)
			t.Run("crud", func(t *testing.T) { testHubCRUD(t, e) })
			t.Run("conflicts", func(t *testing.T) { testHubConflicts(t, e) })
			t.Run("roles", func(t *testing.T) { testHubRoles(t, e) })
			// Last: it starts the reconcilers.
			t.Run("in_use", func(t *testing.T) { testHubInUse(t, e) })
		})
	}
}

func testHubCRUD(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	auth := adminAuth(e.adminToken(t))
	bodies := map[string][]byte{}
	created, err := e.admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "crud-eu-1", Zone: "eu", Region: "eu-west-1",
		CloudProvider: ptr("aws"), DeliveryMode: admin.SyncsetOcm, Capacity: 5, Credentials: &admin.Credentials{"offline_token": hubSecret},
		Ocm: &admin.OCMTarget{ClusterId: "2a8e0f1b", ApiUrl: "https://api.openshift.com"}}, auth)
	if err != nil || created.JSON201 == nil {
		t.Fatalf("CreateHub(crud-eu-1) = %s; want 201", outcome(created, err))
	}
	bodies["CreateHub"] = created.Body
	h := *created.JSON201
	if etag := created.HTTPResponse.Header.Get("ETag"); etag != `"1"` {
		t.Errorf("CreateHub(crud-eu-1): ETag = %q, want %q", etag, `"1"`)
	}
	if h.Kind != admin.HubKindHub || h.Name != "crud-eu-1" || h.Zone != "eu" || h.Region != "eu-west-1" || h.CloudProvider != "aws" ||
		h.DeliveryMode != admin.SyncsetOcm || h.Capacity != 5 || !h.HasCredentials || h.Cordoned || h.PlacedCount != 0 ||
		h.Generation != 1 || h.Href != e.http.BasePath+"/admin/hubs/"+h.Id ||
		h.Ocm == nil || h.Ocm.ClusterId != "2a8e0f1b" || h.Ocm.ApiUrl != "https://api.openshift.com" || h.Hive != nil {
		t.Errorf("CreateHub(crud-eu-1) = %+v, want the request's fields, has_credentials, generation 1", h)
	}
	e.createAgentHub(t, "crud-eu-2", "eu", 3)
	us := e.createAgentHub(t, "crud-us-1", "us", 3)

	got, err := e.admin.GetHubWithResponse(ctx, h.Id, auth)
	if err != nil || got.JSON200 == nil || got.JSON200.Name != "crud-eu-1" || got.HTTPResponse.Header.Get("ETag") != `"1"` {
		t.Fatalf("GetHub(%s) = %s; want 200 crud-eu-1 with ETag \"1\"", h.Id, outcome(got, err))
	}
	bodies["GetHub"] = got.Body
	list, err := e.admin.ListHubsWithResponse(ctx, &admin.ListHubsParams{Size: ptr(50), Search: ptr("zone = 'eu'"), OrderBy: ptr("name desc")}, auth)
	if err != nil || list.JSON200 == nil || list.JSON200.Total != 2 || hubNames(list.JSON200.Items) != "crud-eu-2,crud-eu-1" {
		t.Errorf("ListHubs(zone = 'eu', name desc) = %s; want crud-eu-2, crud-eu-1", outcome(list, err))
	} else {
		bodies["ListHubs"] = list.Body
	}

	steps := []struct {
		call     string
		ifMatch  string
		patch    admin.HubPatch
		status   int
		wantETag string
	}{
		{"capacity", `"1"`, admin.HubPatch{Capacity: ptr(10)}, http.StatusOK, `"2"`},
		{"stale", `"1"`, admin.HubPatch{Capacity: ptr(11)}, http.StatusPreconditionFailed, ""},
		{"garbage", `garbage`, admin.HubPatch{Capacity: ptr(11)}, http.StatusPreconditionFailed, ""},
		{"remove credentials", `"2"`, admin.HubPatch{Credentials: &admin.Credentials{}}, http.StatusBadRequest, ""},
		{"credentials of another mode", `"2"`, admin.HubPatch{Credentials: &admin.Credentials{"kubeconfig": hubSecret}}, http.StatusBadRequest, ""},
		{"to hive without target", `"2"`, admin.HubPatch{DeliveryMode: ptr(admin.SyncsetHive), Credentials: &admin.Credentials{"kubeconfig": hubSecret}},
			http.StatusBadRequest, ""},
		{"set credentials", `"2"`, admin.HubPatch{Credentials: &admin.Credentials{"client_id": "fleet", "client_secret": hubSecret + "-2"}}, http.StatusOK, `"3"`},
		{"to hive", `"3"`, admin.HubPatch{DeliveryMode: ptr(admin.SyncsetHive), Credentials: &admin.Credentials{"kubeconfig": hubSecret + "-3"},
			Hive: &admin.HiveTarget{ClusterDeploymentNamespace: "hive-hubs", ClusterDeploymentName: "crud-eu-1"}}, http.StatusOK, `"4"`},
	}
	for _, s := range steps {
		call := fmt.Sprintf("UpdateHub(%s, If-Match %s)", s.call, s.ifMatch)
		resp, err := e.admin.UpdateHubWithResponse(ctx, h.Id, &admin.UpdateHubParams{IfMatch: ptr(s.ifMatch)}, s.patch, auth)
		if err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		switch s.status {
		case http.StatusPreconditionFailed:
			wantError(t, call, e.apiEnv, fromAdmin(resp.JSON412), resp.StatusCode(), s.status, fleet.CodePreconditionFailed)
			continue
		case http.StatusBadRequest:
			wantError(t, call, e.apiEnv, fromAdmin(resp.JSON400), resp.StatusCode(), s.status, fleet.CodeValidation)
			continue
		}
		if resp.JSON200 == nil || resp.HTTPResponse.Header.Get("ETag") != s.wantETag {
			t.Fatalf("%s = %s, ETag %q; want 200 with ETag %s", call, outcome(resp, err), resp.HTTPResponse.Header.Get("ETag"), s.wantETag)
		}
		bodies[call] = resp.Body
		if !resp.JSON200.HasCredentials || resp.JSON200.Capacity != 10 {
			t.Errorf("%s = has_credentials %v, capacity %d; want true, 10", call, resp.JSON200.HasCredentials, resp.JSON200.Capacity)
		}
	}

	if hive, err := e.admin.GetHubWithResponse(ctx, h.Id, auth); err != nil || hive.JSON200 == nil || hive.JSON200.DeliveryMode != admin.SyncsetHive ||
		hive.JSON200.Hive == nil || *hive.JSON200.Hive != (admin.HiveTarget{ClusterDeploymentNamespace: "hive-hubs", ClusterDeploymentName: "crud-eu-1"}) {
		t.Errorf("GetHub(%s) after the move to hive = %s; want syncset-hive with its ClusterDeployment", h.Id, outcome(hive, err))
	}
	cordoned, err := e.admin.CordonHubWithResponse(ctx, h.Id, auth)
	if err != nil || cordoned.JSON200 == nil || !cordoned.JSON200.Cordoned {
		t.Errorf("CordonHub(%s) = %s; want 200 cordoned", h.Id, outcome(cordoned, err))
	} else {
		bodies["CordonHub"] = cordoned.Body
	}
	uncordoned, err := e.admin.UncordonHubWithResponse(ctx, h.Id, auth)
	if err != nil || uncordoned.JSON200 == nil || uncordoned.JSON200.Cordoned {
		t.Errorf("UncordonHub(%s) = %s; want 200 not cordoned", h.Id, outcome(uncordoned, err))
	} else {
		bodies["UncordonHub"] = uncordoned.Body
	}
	for call, body := range bodies {
		if bytes.Contains(body, []byte(hubSecret)) {
			t.Errorf("%s: the response body contains the hub credential", call)
		}
	}
	if strings.Contains(e.logs.String(), hubSecret) {
		t.Errorf("the service log contains the hub credential")
	}

	deleted, err := e.admin.DeleteHubWithResponse(ctx, us.Id, auth)
	if err != nil || deleted.StatusCode() != http.StatusNoContent {
		t.Fatalf("DeleteHub(%s) = %s; want 204", us.Name, outcome(deleted, err))
	}
	for _, call := range []string{"GetHub", "DeleteHub", "CordonHub"} {
		var status int
		var body *admin.Error
		switch call {
		case "GetHub":
			r, err := e.admin.GetHubWithResponse(ctx, us.Id, auth)
			status, body = mustStatus(t, r, err), r.JSON404
		case "DeleteHub":
			r, err := e.admin.DeleteHubWithResponse(ctx, us.Id, auth)
			status, body = mustStatus(t, r, err), r.JSON404
		case "CordonHub":
			r, err := e.admin.CordonHubWithResponse(ctx, us.Id, auth)
			status, body = mustStatus(t, r, err), r.JSON404
		}
		wantError(t, call+"(deleted hub)", e.apiEnv, fromAdmin(body), status, http.StatusNotFound, fleet.CodeNotFound)
	}
	// A deleted hub's name and agent identity are free again.
	e.createAgentHub(t, "crud-us-1", "us", 1)
}

func testHubConflicts(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	auth := adminAuth(e.adminToken(t))
	first := e.createAgentHub(t, "dup-1", "eu", 1)
	second := e.createAgentHub(t, "dup-2", "eu", 1)
	cases := []struct {
		call   string
		body   string
		status int
		code   fleet.ErrorCode
	}{
		{"same name", `{"name":"dup-1","zone":"us","region":"us-east-1","delivery_mode":"syncset-ocm","capacity":1,
			"ocm":{"cluster_id":"c1","api_url":"https://api.openshift.com"},"credentials":{"offline_token":"t"}}`, http.StatusConflict, fleet.CodeNameTaken},
		{"same agent identity", `{"name":"dup-3","zone":"eu","region":"eu-1","delivery_mode":"agent","capacity":1,"agent_identity":"dup-1-agent"}`, http.StatusConflict, fleet.CodeHubIdentityTaken},
		{"agent without identity", `{"name":"dup-4","zone":"eu","region":"eu-1","delivery_mode":"agent","capacity":1}`, http.StatusBadRequest, fleet.CodeValidation},
		{"unknown mode", `{"name":"dup-5","zone":"eu","region":"eu-1","delivery_mode":"carrier-pigeon","capacity":1}`, http.StatusBadRequest, fleet.CodeValidation},
		{"negative capacity", `{"name":"dup-6","zone":"eu","region":"eu-1","delivery_mode":"syncset-ocm","capacity":-1}`, http.StatusBadRequest, fleet.CodeValidation},
		{"unknown field", `{"name":"dup-7","zone":"eu","region":"eu-1","delivery_mode":"syncset-ocm","capacity":1,"size":"xl"}`, http.StatusBadRequest, fleet.CodeValidation},
		{"bad zone", `{"name":"dup-8","zone":"EU!","region":"eu-1","delivery_mode":"syncset-ocm","capacity":1}`, http.StatusBadRequest, fleet.CodeValidation},
	}
	for _, tc := range cases {
		resp, err := e.admin.CreateHubWithBodyWithResponse(ctx, "application/json", strings.NewReader(tc.body), auth)
		if err != nil {
			t.Fatalf("CreateHub(%s): %v", tc.call, err)
		}
		body := resp.JSON409
		if tc.status == http.StatusBadRequest {
			body = resp.JSON400
		}
		wantError(t, "CreateHub("+tc.call+")", e.apiEnv, fromAdmin(body), resp.StatusCode(), tc.status, tc.code)
	}
	taken, err := e.admin.UpdateHubWithResponse(ctx, second.Id, nil, admin.HubPatch{AgentIdentity: first.AgentIdentity}, auth)
	if err != nil {
		t.Fatalf("UpdateHub(dup-2, agent identity of dup-1): %v", err)
	}
	wantError(t, "UpdateHub(dup-2, agent identity of dup-1)", e.apiEnv, fromAdmin(taken.JSON409), taken.StatusCode(), http.StatusConflict, fleet.CodeHubIdentityTaken)
	cleared, err := e.admin.UpdateHubWithResponse(ctx, second.Id, nil, admin.HubPatch{AgentIdentity: ptr("")}, auth)
	if err != nil {
		t.Fatalf("UpdateHub(dup-2, no agent identity): %v", err)
	}
	wantError(t, "UpdateHub(dup-2, no agent identity)", e.apiEnv, fromAdmin(cleared.JSON400), cleared.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
}

// hubOp is one admin operation on hub, answering its status and error body.
type hubOp struct {
	name  string
	write bool
	ok    int
	do    func(tok string, hub admin.Hub) (int, *admin.Error, error)
}

func hubOps(e *stackEnv) []hubOp {
	ctx := context.Background()
	return []hubOp{
		{"ListHubs", false, http.StatusOK, func(tok string, _ admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.ListHubsWithResponse(ctx, &admin.ListHubsParams{Size: ptr(10)}, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
		{"GetHub", false, http.StatusOK, func(tok string, h admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.GetHubWithResponse(ctx, h.Id, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
		{"CreateHub", true, http.StatusCreated, func(tok string, h admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: h.Name + "-new", Zone: "roles", Region: "roles-1",
				DeliveryMode: admin.SyncsetHive, Capacity: 1, Hive: &admin.HiveTarget{ClusterDeploymentNamespace: "hive", ClusterDeploymentName: h.Name},
				Credentials: &admin.Credentials{"kubeconfig": "k"}}, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
		{"UpdateHub", true, http.StatusOK, func(tok string, h admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.UpdateHubWithResponse(ctx, h.Id, nil, admin.HubPatch{Capacity: ptr(2)}, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
		{"CordonHub", true, http.StatusOK, func(tok string, h admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.CordonHubWithResponse(ctx, h.Id, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
		{"UncordonHub", true, http.StatusOK, func(tok string, h admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.UncordonHubWithResponse(ctx, h.Id, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
		{"DeleteHub", true, http.StatusNoContent, func(tok string, h admin.Hub) (int, *admin.Error, error) {
			r, err := e.admin.DeleteHubWithResponse(ctx, h.Id, adminAuth(tok))
			return statusAndError(r, err, func() *admin.Error { return r.JSON403 })
		}},
	}
}

func testHubRoles(t *testing.T, e *stackEnv) {
	roles := []struct {
		name       string
		tok        string
		read, edit bool
	}{
		{"user", e.userToken(t, "org-1", "alice"), false, false},
		{"agent", e.agentToken(t, "roles-agent"), false, false},
		{"viewer", e.viewerToken(t), true, false},
		{"admin", e.adminToken(t), true, true},
	}
	for _, role := range roles {
		for i, op := range hubOps(e) {
			target := e.createSyncSetHub(t, fmt.Sprintf("roles-%s-%d", role.name, i))
			status, body, err := op.do(role.tok, target)
			if err != nil {
				t.Fatalf("%s() as %s: %v", op.name, role.name, err)
			}
			allowed := role.edit || (role.read && !op.write)
			if allowed && status != op.ok {
				t.Errorf("%s() as %s = %d, want %d", op.name, role.name, status, op.ok)
			}
			if !allowed {
				wantError(t, op.name+"() as "+role.name, e.apiEnv, fromAdmin(body), status, http.StatusForbidden, fleet.CodeAdminRoleRequired)
			}
		}
	}
}

// createSyncSetHub registers a hub that needs no agent.
func (e *stackEnv) createSyncSetHub(t *testing.T, name string) admin.Hub {
	t.Helper()
	resp, err := e.admin.CreateHubWithResponse(context.Background(), admin.HubCreate{Name: name, Zone: "roles", Region: "roles-1",
		DeliveryMode: admin.SyncsetOcm, Capacity: 1, Ocm: &admin.OCMTarget{ClusterId: name, ApiUrl: "https://api.openshift.com"},
		Credentials: &admin.Credentials{"offline_token": "t"}}, adminAuth(e.adminToken(t)))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateHub(%s) = %s; want 201", name, outcome(resp, err))
	}
	return *resp.JSON201
}

// testHubInUse places a registration on a hub through the reconcilers: the
// hub cannot be deleted nor shrunk below it until the registration is gone.
func testHubInUse(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	e.startReconcilers(t)
	auth := adminAuth(e.adminToken(t))
	hub := e.createAgentHub(t, "busy-hub", "eu", 2)
	e.heartbeat(t, hub, 0)
	tok := e.userToken(t, "org-busy", "alice")
	c := e.createCluster(t, tok, public.ClusterCreate{Name: "placed", Zone: ptr("eu"), Product: public.OCP})
	e.eventuallyCluster(t, tok, c.Id, "placed on busy-hub", func(c public.Cluster) bool { return c.Hub != nil && c.Hub.Id == hub.Id })
	if got := e.getHub(t, hub.Id); got.PlacedCount != 1 {
		t.Errorf("GetHub(busy-hub).placed_count = %d, want 1", got.PlacedCount)
	}

	del, err := e.admin.DeleteHubWithResponse(ctx, hub.Id, auth)
	if err != nil {
		t.Fatalf("DeleteHub(busy-hub): %v", err)
	}
	wantError(t, "DeleteHub(busy-hub)", e.apiEnv, fromAdmin(del.JSON409), del.StatusCode(), http.StatusConflict, fleet.CodeHubInUse)
	shrink, err := e.admin.UpdateHubWithResponse(ctx, hub.Id, nil, admin.HubPatch{Capacity: ptr(0)}, auth)
	if err != nil {
		t.Fatalf("UpdateHub(busy-hub, capacity 0): %v", err)
	}
	wantError(t, "UpdateHub(busy-hub, capacity 0)", e.apiEnv, fromAdmin(shrink.JSON400), shrink.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	if fit, err := e.admin.UpdateHubWithResponse(ctx, hub.Id, nil, admin.HubPatch{Capacity: ptr(1)}, auth); err != nil || fit.JSON200 == nil {
		t.Errorf("UpdateHub(busy-hub, capacity 1) = %s; want 200", outcome(fit, err))
	}

	if resp, err := e.client.DeleteClusterWithResponse(ctx, c.Id, bearer(tok)); err != nil || resp.JSON202 == nil {
		t.Fatalf("DeleteCluster(placed) = %s; want 202", outcome(resp, err))
	}
	e.eventuallyCluster(t, tok, c.Id, "withdrawn", func(c public.Cluster) bool { return c.Phase == public.Deleting })
	e.ackAll(t, hub)
	e.eventuallyGone(t, tok, c.Id)
	if del, err := e.admin.DeleteHubWithResponse(ctx, hub.Id, auth); err != nil || del.StatusCode() != http.StatusNoContent {
		t.Errorf("DeleteHub(busy-hub) once empty = %s; want 204", outcome(del, err))
	}
}

func hubNames(hubs []admin.Hub) string {
	names := make([]string, len(hubs))
	for i, h := range hubs {
		names[i] = h.Name
	}
	return strings.Join(names, ",")
}

// statusAndError returns a response's status and the error body pick chooses.
func statusAndError(resp response, err error, pick func() *admin.Error) (int, *admin.Error, error) {
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), pick(), nil
}

// mustStatus returns a response's status, failing t on a transport error.
func mustStatus(t *testing.T, resp response, err error) int {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	return resp.StatusCode()
}
