package rest_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// usDeployment is the deployment the zone map names for zone us.
const usDeployment = "https://fleet.us.example.com/api/fleet_manager/v1"

// TestZones drives a deployment that serves zones eu and eu-2 only, under
// each flavour: what it refuses, what it accepts, and what it shows.
func TestZones(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			cfg := testStoreConfig()
			cfg.Zones = fleet.Zones{Served: []string{"eu", "eu-2"}, Deployments: map[string]string{"us": usDeployment}}
			cfg.DefaultZone = "eu"
			e := newStackEnvWith(t, f, cfg)
			t.Run("hubs", func(t *testing.T) { testZoneHubs(t, e) })
			t.Run("registrations", func(t *testing.T) { testZoneRegistrations(t, e) })
			t.Run("reads", func(t *testing.T) { testZoneReads(t, e) })
		})
	}
}

func testZoneHubs(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	auth := adminAuth(e.adminToken(t))
	for _, tc := range []struct {
		zone, wantReason string
		wantDetails      map[string]string
	}{
		{"us", "the deployment serving zone us: " + usDeployment, map[string]string{"zone": "us", "deployment_url": usDeployment}},
		{"sa", "knows no deployment that does", map[string]string{"zone": "sa"}},
	} {
		call := "CreateHub(zone " + tc.zone + ")"
		resp, err := e.admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "hub-" + tc.zone, Zone: tc.zone, Region: tc.zone + "-1",
			DeliveryMode: admin.Agent, Capacity: 1, AgentIdentity: ptr("hub-" + tc.zone + "-agent")}, auth)
		g.Expect(err).NotTo(gomega.HaveOccurred(), call)
		wantError(t, call, e.apiEnv, fromAdmin(resp.JSON409), resp.StatusCode(), http.StatusConflict, fleet.CodeZoneNotServed)
		g.Expect(resp.JSON409.Reason).To(gomega.ContainSubstring(tc.wantReason), call)
		g.Expect(resp.JSON409.Details).To(gomega.HaveValue(gomega.Equal(tc.wantDetails)), call)
	}
	list, err := e.admin.ListHubsWithResponse(ctx, &admin.ListHubsParams{}, auth)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.JSON200).NotTo(gomega.BeNil(), "ListHubs() = %s", outcome(list, err))
	g.Expect(list.JSON200.Total).To(gomega.Equal(0), "ListHubs() after two refusals")

	served := e.createAgentHub(t, "zone-eu-2", "eu-2", 1)
	g.Expect(served.Zone).To(gomega.Equal("eu-2"))
}

func testZoneRegistrations(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	tok := e.userToken(t, "org-zones", "zoe")
	for _, tc := range []struct {
		zone, wantReason string
		wantDetails      map[string]string
	}{
		{"us", "create the cluster at the deployment serving zone us: " + usDeployment, map[string]string{"zone": "us", "deployment_url": usDeployment}},
		{"sa", "knows no deployment that does", map[string]string{"zone": "sa"}},
	} {
		call := "CreateCluster(zone " + tc.zone + ")"
		resp, err := e.client.CreateClusterWithResponse(ctx, nil,
			public.ClusterCreate{Name: "reg-" + tc.zone, Zone: ptr(tc.zone), Product: public.OCP}, bearer(tok))
		g.Expect(err).NotTo(gomega.HaveOccurred(), call)
		wantError(t, call, e.apiEnv, resp.JSON409, resp.StatusCode(), http.StatusConflict, fleet.CodeZoneNotServed)
		g.Expect(resp.JSON409.Reason).To(gomega.ContainSubstring(tc.wantReason), call)
		g.Expect(resp.JSON409.Details).To(gomega.HaveValue(gomega.Equal(tc.wantDetails)), call)
	}
	// The zone is checked before the caller: a deployment that serves the
	// zone decides who may register there.
	denied := e.userToken(t, "", "nobody")
	resp, err := e.client.CreateClusterWithResponse(ctx, nil, public.ClusterCreate{Name: "reg-no-org", Zone: ptr("us"), Product: public.OCP}, bearer(denied))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateCluster(zone us, no org)", e.apiEnv, resp.JSON409, resp.StatusCode(), http.StatusConflict, fleet.CodeZoneNotServed)

	explicit := e.createCluster(t, tok, public.ClusterCreate{Name: "reg-eu-2", Zone: ptr("eu-2"), Product: public.OCP})
	g.Expect(explicit.Zone).To(gomega.Equal("eu-2"))
	defaulted := e.createCluster(t, tok, public.ClusterCreate{Name: "reg-default", Product: public.OCP})
	g.Expect(defaulted.Zone).To(gomega.Equal("eu"), "CreateCluster(no zone) takes --registration-default-zone")
	list, err := e.client.ListClustersWithResponse(ctx, &public.ListClustersParams{OrderBy: ptr("name")}, bearer(tok))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.JSON200).NotTo(gomega.BeNil(), "ListClusters() = %s", outcome(list, err))
	g.Expect(clusterNames(list.JSON200.Items)).To(gomega.Equal([]string{"reg-default", "reg-eu-2"}), "ListClusters() holds only the accepted clusters")
}

// testZoneReads plants rows of zone us, as a deployment serving every zone
// left them before this one was limited to eu, and checks that no read
// shows them and that their hub's agent is not served.
func testZoneReads(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	before := postgres.NewStore(pgtest.Open(t, e.dbCfg), e.keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	oldHub, err := before.CreateHub(ctx, fleet.HubCreate{Name: "left-us", Zone: "us", Region: "us-east-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 5, AgentIdentity: "left-us-agent"})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "CreateHub(left-us) on a store serving every zone")
	oldReg, _, err := before.CreateRegistration(ctx, fleet.Identity{OrgID: "org-reads", Username: "rae"},
		fleet.RegistrationCreate{Name: "left-us", Zone: "us", Product: fleet.ProductOCP}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "CreateRegistration(left-us) on a store serving every zone")
	_, err = before.IngestInventory(ctx, oldHub.ID, "left-us-agent", fleet.InventoryBatch{Generation: 1,
		Upserts: []fleet.ManagedClusterSummary{{Name: "mc-us-1"}}})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "IngestInventory(left-us) on a store serving every zone")

	euHub := e.createAgentHub(t, "reads-eu", "eu", 5)
	ingest, err := e.agent.PostHubInventoryWithResponse(ctx, euHub.Id, private.InventoryBatch{Generation: 1,
		Upserts: []private.ManagedClusterSummary{{Name: "mc-eu-1"}}, Deletes: []string{}}, agentAuth(e.agentToken(t, "reads-eu-agent")))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(ingest.JSON200).NotTo(gomega.BeNil(), "PostHubInventory(reads-eu) = %s", outcome(ingest, err))

	admins := adminAuth(e.adminToken(t))
	hubs, err := e.admin.ListHubsWithResponse(ctx, &admin.ListHubsParams{}, admins)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hubs.JSON200).NotTo(gomega.BeNil(), "ListHubs() = %s", outcome(hubs, err))
	g.Expect(hubNames(hubs.JSON200.Items)).NotTo(gomega.ContainSubstring("left-us"), "ListHubs() shows no hub of zone us")
	g.Expect(hubs.JSON200.Items).To(gomega.ContainElement(gomega.HaveField("Name", "reads-eu")))
	hub, err := e.admin.GetHubWithResponse(ctx, oldHub.ID, admins)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "GetHub(left-us)", e.apiEnv, fromAdmin(hub.JSON404), hub.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	cordon, err := e.admin.CordonHubWithResponse(ctx, oldHub.ID, admins)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CordonHub(left-us)", e.apiEnv, fromAdmin(cordon.JSON404), cordon.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)

	tok := e.userToken(t, "org-reads", "rae")
	regs, err := e.client.ListClustersWithResponse(ctx, &public.ListClustersParams{}, bearer(tok))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(regs.JSON200).NotTo(gomega.BeNil(), "ListClusters() = %s", outcome(regs, err))
	g.Expect(regs.JSON200.Total).To(gomega.Equal(0), "ListClusters() shows no cluster of zone us")
	reg, err := e.client.GetClusterWithResponse(ctx, oldReg.ID, bearer(tok))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "GetCluster(left-us)", e.apiEnv, reg.JSON404, reg.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	del, err := e.client.DeleteClusterWithResponse(ctx, oldReg.ID, bearer(tok))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteCluster(left-us)", e.apiEnv, del.JSON404, del.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)

	mcs, err := e.client.ListManagedClustersWithResponse(ctx, &public.ListManagedClustersParams{}, bearer(e.adminToken(t)))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(mcs.JSON200).NotTo(gomega.BeNil(), "ListManagedClusters() = %s", outcome(mcs, err))
	var names []string
	for _, mc := range mcs.JSON200.Items {
		names = append(names, mc.Name)
	}
	sort.Strings(names)
	g.Expect(strings.Join(names, ",")).To(gomega.Equal("mc-eu-1"), "ListManagedClusters() as an admin shows the served zones' clusters only")

	left, err := e.agent.PostHubInventoryWithResponse(ctx, oldHub.ID, private.InventoryBatch{Generation: 1,
		Upserts: []private.ManagedClusterSummary{{Name: "mc-us-2"}}, Deletes: []string{}}, agentAuth(e.agentToken(t, "left-us-agent")))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "PostHubInventory(left-us)", e.apiEnv, fromPrivate(left.JSON404), left.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
}
