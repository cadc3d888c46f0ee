package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// clusterViewRow is a row of fleet_clusters_v1, the standard cluster schema.
type clusterViewRow struct {
	InventoryID       string
	ClusterID         string
	Name              string
	HubID             string
	HubName           string
	Zone              string
	Region            string
	CloudProvider     string
	Product           string
	OpenshiftVersion  string
	KubernetesVersion string
	Available         string
	Joined            string
	Capacity          string
	Allocatable       string
	NodeCount         *int
	ConsoleURL        string
	Labels            string
	OrgID             *string
	RegistrationID    *string
	Stale             bool
}

// TestStandardClusterSchema reads fleet_clusters_v1 over a realistic
// ManagedCluster and its ManagedClusterInfo, as a hub's agent reports them,
// and checks each column against the Kubernetes field it documents
// (docs/resource-database.md).
func TestStandardClusterSchema(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-eu-1", Zone: "eu", Region: "eu-west-1", CloudProvider: "aws",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "hub-eu-1-agent", OwnerOrgID: "org-7"})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	// A ManagedCluster as RHACM fills it on an OpenShift hub.
	_, err = store.IngestInventory(ctx, hub.ID, hub.AgentIdentity, fleet.InventoryBatch{Generation: 1, Upserts: []fleet.ManagedClusterSummary{{
		Name: "prod-east", UID: "5b3e0c1a-1111-4c36-9d8e-0a1b2c3d4e5f", ResourceVersion: "48213",
		Labels: map[string]string{"cloud": "Amazon", "vendor": "OpenShift", "env": "prod", "name": "prod-east"},
		Claims: map[string]string{
			"id.openshift.io": "7f6e5d4c-3b2a-4190-8f7e-6d5c4b3a2910", "version.openshift.io": "4.17.9",
			"platform.open-cluster-management.io": "AWS", "product.open-cluster-management.io": "OpenShift",
			"region.open-cluster-management.io": "us-east-1",
		},
		Capacity:    map[string]string{"cpu": "48", "memory": "195876Mi", "core_worker": "36"},
		Allocatable: map[string]string{"cpu": "45500m", "memory": "187684Mi"},
		Conditions: []fleet.ClusterCondition{
			{Type: "HubAcceptedManagedCluster", Status: "True", Reason: "HubClusterAdminAccepted"},
			{Type: "ManagedClusterJoined", Status: "True", Reason: "ManagedClusterJoined"},
			{Type: "ManagedClusterConditionAvailable", Status: "True", Reason: "ManagedClusterAvailable"},
		},
		KubernetesVersion: "v1.30.7",
	}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	var view clusterViewRow
	read := func() {
		t.Helper()
		g.Expect(db.Gorm.Raw(`SELECT inventory_id, cluster_id, name, hub_id, hub_name, zone, region, cloud_provider, product,
	openshift_version, kubernetes_version, available, joined, capacity::text, allocatable::text, node_count, console_url,
	labels::text, org_id, registration_id, stale FROM fleet_clusters_v1 WHERE name = 'prod-east'`).Scan(&view).Error).To(gomega.Succeed())
	}
	read()
	g.Expect(view.ClusterID).To(gomega.Equal("7f6e5d4c-3b2a-4190-8f7e-6d5c4b3a2910"))
	g.Expect(view.NodeCount).To(gomega.BeNil(), "no ManagedClusterInfo yet")
	g.Expect(view.ConsoleURL).To(gomega.BeEmpty())

	// Its ManagedClusterInfo, as the klusterlet's addon reports it.
	var info map[string]any
	g.Expect(json.Unmarshal([]byte(managedClusterInfo), &info)).To(gomega.Succeed())
	_, err = store.IngestResources(ctx, hub.ID, hub.AgentIdentity, fleet.ResourceBatch{Group: "internal.open-cluster-management.io",
		Kind: "ManagedClusterInfo", Generation: 1, Upserts: []fleet.ResourceObject{{Namespace: "prod-east", Name: "prod-east",
			UID: "0c9d8e7f-2222-4d5e-8f90-a1b2c3d4e5f6", ResourceVersion: "48250", Labels: map[string]string{"cloud": "Amazon"}, Body: info}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	read()

	g.Expect(view.Name).To(gomega.Equal("prod-east"))
	g.Expect(view.HubID).To(gomega.Equal(hub.ID))
	g.Expect(view.HubName).To(gomega.Equal("hub-eu-1"))
	g.Expect(view.Zone).To(gomega.Equal("eu"))
	g.Expect(view.Region).To(gomega.Equal("us-east-1"), "the region claim beats the hub's region")
	g.Expect(view.CloudProvider).To(gomega.Equal("AWS"))
	g.Expect(view.Product).To(gomega.Equal("OpenShift"))
	g.Expect(view.OpenshiftVersion).To(gomega.Equal("4.17.9"))
	g.Expect(view.KubernetesVersion).To(gomega.Equal("v1.30.7"))
	g.Expect(view.Available).To(gomega.Equal("True"))
	g.Expect(view.Joined).To(gomega.Equal("True"))
	g.Expect(view.Capacity).To(gomega.MatchJSON(`{"cpu": "48", "memory": "195876Mi", "core_worker": "36"}`))
	g.Expect(view.Allocatable).To(gomega.MatchJSON(`{"cpu": "45500m", "memory": "187684Mi"}`))
	g.Expect(view.NodeCount).To(gomega.HaveValue(gomega.Equal(3)))
	g.Expect(view.ConsoleURL).To(gomega.Equal("https://console-openshift-console.apps.prod-east.example.com"))
	g.Expect(view.Labels).To(gomega.MatchJSON(`{"cloud": "Amazon", "vendor": "OpenShift", "env": "prod", "name": "prod-east"}`))
	g.Expect(view.OrgID).To(gomega.HaveValue(gomega.Equal("org-7")), "a customer hub's clusters are its owner's")
	g.Expect(view.RegistrationID).To(gomega.BeNil())
	g.Expect(view.Stale).To(gomega.BeFalse())

	// Without claims, the ManagedClusterInfo fills the id, versions and vendor.
	_, err = store.IngestInventory(ctx, hub.ID, hub.AgentIdentity, fleet.InventoryBatch{Generation: 1, Upserts: []fleet.ManagedClusterSummary{{
		Name: "prod-east", UID: "5b3e0c1a-1111-4c36-9d8e-0a1b2c3d4e5f", ResourceVersion: "48300", Labels: map[string]string{"env": "prod"},
	}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	read()
	g.Expect(view.ClusterID).To(gomega.Equal("7f6e5d4c-3b2a-4190-8f7e-6d5c4b3a2910"))
	g.Expect(view.OpenshiftVersion).To(gomega.Equal("4.17.9"))
	g.Expect(view.KubernetesVersion).To(gomega.Equal("v1.30.7"))
	g.Expect(view.CloudProvider).To(gomega.Equal("Amazon"))
	g.Expect(view.Region).To(gomega.Equal("eu-west-1"), "without a region claim, the hub's region")
	g.Expect(view.Available).To(gomega.Equal("Unknown"))

	// A tombstoned cluster leaves the view.
	_, err = store.IngestInventory(ctx, hub.ID, hub.AgentIdentity, fleet.InventoryBatch{Generation: 1, Deletes: []string{"prod-east"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(countRows(t, db, `SELECT count(*) FROM fleet_clusters_v1`)).To(gomega.Equal(0))
}

// managedClusterInfo is a ManagedClusterInfo as the klusterlet's work agent
// fills it on an OpenShift cluster (the fields of the hub CRD's schema).
const managedClusterInfo = `{
  "apiVersion": "internal.open-cluster-management.io/v1beta1",
  "kind": "ManagedClusterInfo",
  "metadata": {"name": "prod-east", "namespace": "prod-east", "labels": {"cloud": "Amazon"}},
  "spec": {"masterEndpoint": "https://api.prod-east.example.com:6443", "loggingCA": ""},
  "status": {
    "clusterID": "7f6e5d4c-3b2a-4190-8f7e-6d5c4b3a2910",
    "cloudVendor": "Amazon",
    "kubeVendor": "OpenShift",
    "version": "v1.30.7",
    "consoleURL": "https://console-openshift-console.apps.prod-east.example.com",
    "distributionInfo": {"type": "OCP", "ocp": {"version": "4.17.9", "channel": "stable-4.17", "desired": {"version": "4.17.9"}}},
    "conditions": [{"type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined", "message": "joined", "lastTransitionTime": "2026-11-30T10:00:00Z"}],
    "nodeList": [
      {"name": "ip-10-0-1-10.ec2.internal", "labels": {"node-role.kubernetes.io/master": ""}, "capacity": {"cpu": "8", "memory": "32Gi"},
       "conditions": [{"type": "Ready", "status": "True"}]},
      {"name": "ip-10-0-2-20.ec2.internal", "labels": {"node-role.kubernetes.io/worker": ""}, "capacity": {"cpu": "16", "memory": "64Gi"},
       "conditions": [{"type": "Ready", "status": "True"}]},
      {"name": "ip-10-0-3-30.ec2.internal", "labels": {"node-role.kubernetes.io/worker": ""}, "capacity": {"cpu": "16", "memory": "64Gi"},
       "conditions": [{"type": "Ready", "status": "True"}]}
    ]
  }
}`

// TestInventoryDocumentTypes checks the column types migration 202611300013
// leaves: a managed cluster's claims, capacity, allocatable and conditions
// are json, its labels jsonb, and fleet_clusters_v1 still answers jsonb for
// capacity, allocatable and labels, as version 1 of the view promised.
func TestInventoryDocumentTypes(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	var got []struct{ TableName, ColumnName, DataType string }
	err := db.Gorm.Raw(`SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_name IN ('managed_clusters', 'fleet_clusters_v1')
		AND column_name IN ('labels', 'claims', 'capacity', 'allocatable', 'conditions')
		ORDER BY table_name, column_name`).Scan(&got).Error
	want := []struct{ TableName, ColumnName, DataType string }{
		{"fleet_clusters_v1", "allocatable", "jsonb"}, {"fleet_clusters_v1", "capacity", "jsonb"}, {"fleet_clusters_v1", "labels", "jsonb"},
		{"managed_clusters", "allocatable", "json"}, {"managed_clusters", "capacity", "json"}, {"managed_clusters", "claims", "json"},
		{"managed_clusters", "conditions", "json"}, {"managed_clusters", "labels", "jsonb"},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("column types = %v, %v; want %v", got, err, want)
	}
}
