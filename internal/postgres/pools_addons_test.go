package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestPoolClusterAddOnsCarryTheRefusedManifestsCause: OCM's work agent
// sets its ManifestWork's Applied condition to a summary ("Failed to apply
// manifest work") and puts what the managed cluster said of each manifest in
// the manifest's own Applied condition under status.resourceStatus; a
// refused add-on's message is the refused manifests' messages, in order. A
// work with no resource status keeps its work condition's message. The
// work's Available condition is served beside Applied (Unknown when unset
// or not a condition status).
func TestPoolClusterAddOnsCarryTheRefusedManifestsCause(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	hub := poolHub(t, store)
	pool := newPool(t, store, alice, "kafka-eu", 1, 1)
	scalePass(t, store, pool.ID)
	markPoolClustersReady(t, db, pool.ID, hub.ID)
	var cluster string
	g.Expect(db.Gorm.Raw(`SELECT cluster_name FROM pool_clusters WHERE pool_id = ?`, pool.ID).Scan(&cluster).Error).To(gomega.Succeed())

	manifest := func(name, status, message string) string {
		return `{"resourceMeta": {"kind": "ConfigMap", "name": "` + name + `"}, "conditions": [{"type": "Applied", "status": "` + status +
			`", "reason": "x", "message": "` + message + `"}]}`
	}
	for name, body := range map[string]string{
		"addon-applied": `{"status": {"conditions": [{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
			"message": "Apply manifest work complete"}, {"type": "Available", "status": "True", "reason": "ResourcesAvailable"}],
			"resourceStatus": {"manifests": [` + manifest("a", "True", "Apply manifest complete") + `]}}}`,
		"addon-refused": `{"status": {"conditions": [{"type": "Applied", "status": "False", "reason": "AppliedManifestWorkFailed",
			"message": "Failed to apply manifest work"}, {"type": "Available", "status": "False", "reason": "ResourcesNotAvailable"}], "resourceStatus": {"manifests": [` + manifest("a", "False", "Failed to apply manifest: no kind") + `, ` +
			manifest("b", "True", "Apply manifest complete") + `, ` + manifest("c", "False", "Failed to apply manifest: invalid port") + `]}}}`,
		"addon-summary": `{"status": {"conditions": [{"type": "Applied", "status": "False", "reason": "AppliedManifestFailed",
			"message": "the work's own"}, {"type": "Available", "status": "maybe"}], "resourceStatus": {"manifests": "not a list"}}}`,
	} {
		g.Expect(db.Gorm.Exec(`INSERT INTO resources (hub_id, zone, api_group, version, kind, namespace, name, cluster_name, body, content_hash)
VALUES (?, 'eu', 'work.open-cluster-management.io', 'v1', 'ManifestWork', ?, ?, ?, ?, 'h')`, hub.ID, cluster, name, cluster, body).Error).
			To(gomega.Succeed())
	}
	clusters, _, err := store.ListPoolClusters(ctx, "org-a", pool.ID, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(clusters).To(gomega.HaveLen(1))
	g.Expect(clusters[0].AddOns).To(gomega.Equal([]fleet.AddOnStatus{
		{Name: "applied", Applied: fleet.ConditionTrue, Available: fleet.ConditionTrue, Reason: "AppliedManifestWorkComplete",
			Message: "Apply manifest work complete"},
		{Name: "refused", Applied: fleet.ConditionFalse, Available: fleet.ConditionFalse, Reason: "AppliedManifestWorkFailed",
			Message: "Failed to apply manifest: no kind; Failed to apply manifest: invalid port"},
		{Name: "summary", Applied: fleet.ConditionFalse, Available: fleet.ConditionUnknown, Reason: "AppliedManifestFailed", Message: "the work's own"},
	}))
}
