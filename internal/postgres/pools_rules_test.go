package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestBookingFollowsTheListedState: the state a pool's cluster is listed in,
// whether a booking may go to it and whether a refused booking marks the
// pool exhausted are one rule. A booking goes only to a cluster listed ready
// or scaling; a refused one marks the pool exhausted unless a cluster is
// listed provisioning. A cluster whose ClusterDeployment reports
// ProvisionFailed is failed whatever its registration's phase and its
// Joined condition say, for bookings as for the list.
func TestBookingFollowsTheListedState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	hub := poolHub(t, store)
	provisionFailed := func(pool string) string {
		return `INSERT INTO resources (hub_id, zone, api_group, version, kind, namespace, name, cluster_name, body, content_hash)
SELECT '` + hub.ID + `', 'eu', 'hive.openshift.io', 'v1', 'ClusterDeployment', cluster_name, cluster_name, cluster_name,
	'{"status": {"conditions": [{"type": "ProvisionFailed", "status": "True", "reason": "InstallFailed"}]}}', 'h'
FROM pool_clusters WHERE pool_id = '` + pool + `'`
	}
	notJoined := func(pool string) string {
		return `UPDATE registrations SET hub_conditions = '[]' WHERE id IN (SELECT registration_id FROM pool_clusters WHERE pool_id = '` + pool + `')`
	}
	for _, tc := range []struct {
		name   string
		mutate func(pool string) []string
		state  fleet.PoolClusterState
	}{
		{"joined", func(string) []string { return nil }, fleet.PoolClusterReady},
		{"not-joined", func(p string) []string { return []string{notJoined(p)} }, fleet.PoolClusterProvisioning},
		{"phase-failed", func(p string) []string {
			return []string{`UPDATE registrations SET phase = 'failed' WHERE id IN (SELECT registration_id FROM pool_clusters WHERE pool_id = '` + p + `')`}
		}, fleet.PoolClusterFailed},
		{"install-failed-joined", func(p string) []string { return []string{provisionFailed(p)} }, fleet.PoolClusterFailed},
		{"install-failed-not-joined", func(p string) []string { return []string{provisionFailed(p), notJoined(p)} }, fleet.PoolClusterFailed},
		{"deleting", func(p string) []string {
			return []string{`UPDATE registrations SET deletion_requested_at = now() WHERE id IN (SELECT registration_id FROM pool_clusters WHERE pool_id = '` + p + `')`}
		}, fleet.PoolClusterDeprovisioning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			pool := newPool(t, store, alice, tc.name, 1, 1)
			scalePass(t, store, pool.ID)
			markPoolClustersReady(t, db, pool.ID, hub.ID)
			for _, stmt := range tc.mutate(pool.ID) {
				g.Expect(db.Gorm.Exec(stmt).Error).To(gomega.Succeed())
			}
			clusters, _, err := store.ListPoolClusters(ctx, "org-a", pool.ID, fleet.ListQuery{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(clusters).To(gomega.HaveLen(1))
			g.Expect(clusters[0].State).To(gomega.Equal(tc.state), "listed state")

			_, err = store.CreateReservation(ctx, alice, pool.ID, fleet.ReservationCreate{Units: 1, InstanceID: "i-1"})
			inService := tc.state == fleet.PoolClusterReady || tc.state == fleet.PoolClusterScaling
			if inService {
				g.Expect(err).NotTo(gomega.HaveOccurred(), "a cluster listed %s takes bookings", tc.state)
				return
			}
			g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeCapacityExhausted), "a cluster listed %s takes no booking", tc.state)
			exhausted := countRows(t, db, `SELECT count(*) FROM capacity_pools WHERE id = ? AND exhausted_at IS NOT NULL`, pool.ID) == 1
			g.Expect(exhausted).To(gomega.Equal(tc.state != fleet.PoolClusterProvisioning),
				"a refused booking marks the pool exhausted unless its cluster is listed provisioning (listed %s)", tc.state)
		})
	}
}
