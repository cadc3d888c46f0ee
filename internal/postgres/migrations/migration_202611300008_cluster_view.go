package migrations

import (
	"fmt"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300008ClusterView creates fleet_clusters_v1, the standard
// cluster schema: one row per live ManagedCluster of every hub, joined with
// its hub, its registration and its ManagedClusterInfo. Other services read
// it; its columns never change meaning, and a change that would is a new
// view (fleet_clusters_v2) beside this one (docs/resource-database.md).
func migration202611300008ClusterView() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300008",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(clusterViewV1SQL("mc.capacity", "mc.allocatable")).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP VIEW fleet_clusters_v1;`).Error
		},
	}
}

// clusterViewV1SQL creates fleet_clusters_v1, reading its capacity and
// allocatable (jsonb) with the expressions given: the columns themselves,
// or, since migration 202611300013 stored them as json, their casts.
func clusterViewV1SQL(capacity, allocatable string) string {
	return fmt.Sprintf(`
CREATE VIEW fleet_clusters_v1 AS
SELECT
	mc.id                                                                         AS inventory_id,
	COALESCE(NULLIF(mc.cluster_id, ''), NULLIF(mci.body #>> '{status,clusterID}', ''), '') AS cluster_id,
	mc.name                                                                       AS name,
	mc.hub_id                                                                     AS hub_id,
	h.name                                                                        AS hub_name,
	h.zone                                                                        AS zone,
	COALESCE(NULLIF(mc.region, ''), h.region)                                     AS region,
	COALESCE(NULLIF(mc.platform, ''), NULLIF(mci.body #>> '{status,cloudVendor}', ''), h.cloud_provider) AS cloud_provider,
	mc.product                                                                    AS product,
	COALESCE(NULLIF(mc.openshift_version, ''), NULLIF(mci.body #>> '{status,distributionInfo,ocp,version}', ''), '') AS openshift_version,
	COALESCE(NULLIF(mc.kubernetes_version, ''), NULLIF(mci.body #>> '{status,version}', ''), '') AS kubernetes_version,
	mc.available                                                                  AS available,
	mc.joined                                                                     AS joined,
	%[1]s AS capacity,
	%[2]s AS allocatable,
	CASE WHEN jsonb_typeof(mci.body #> '{status,nodeList}') = 'array'
		THEN jsonb_array_length(mci.body #> '{status,nodeList}') END            AS node_count,
	COALESCE(NULLIF(mc.console_url, ''), NULLIF(mci.body #>> '{status,consoleURL}', ''), '') AS console_url,
	mc.labels                                                                     AS labels,
	COALESCE(h.owner_org_id, r.org_id)                                            AS org_id,
	mc.registration_id                                                            AS registration_id,
	COALESCE(h.last_inventory_at, mc.updated_at)                                  AS last_seen_at,
	h.inventory_stale                                                             AS stale,
	mc.created_at                                                                 AS created_at,
	mc.updated_at                                                                 AS updated_at
FROM managed_clusters mc
JOIN hubs h ON h.id = mc.hub_id
LEFT JOIN registrations r ON r.id = mc.registration_id
LEFT JOIN resources mci ON mci.hub_id = mc.hub_id AND mci.cluster_name = mc.name
	AND mci.api_group = 'internal.open-cluster-management.io' AND mci.kind = 'ManagedClusterInfo'
	AND mci.deleted_at IS NULL
WHERE mc.deleted_at IS NULL AND h.deleted_at IS NULL;
`, capacity, allocatable)
}
