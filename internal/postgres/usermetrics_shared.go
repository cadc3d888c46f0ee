package postgres

import (
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// identityColumns are the columns of managed_clusters that identify a
// cluster's series in the metrics backend, by fleet.MetricsScope's
// ClusterLabelSource; both are indexed among the live clusters.
var identityColumns = map[string]string{"cluster-id": "cluster_id", "name": "name"}

// markSharedIdentities sets SharedIdentity on the clusters whose identity
// (by scope.ClusterLabelSource) a live cluster of another organisation, or
// of none, carries too. The identity comes from the cluster (its claims, or
// a name its registration chose): one that copies another organisation's
// must not read that organisation's series. An admin reads every series, so
// its scope is left alone.
func markSharedIdentities(db *gorm.DB, scope fleet.MetricsScope, clusters []fleet.MetricsCluster) error {
	column, ok := identityColumns[scope.ClusterLabelSource]
	if !ok || scope.Admin || len(clusters) == 0 {
		return nil
	}
	values := make([]string, 0, len(clusters))
	for _, c := range clusters {
		if v := identityOf(c, column); v != "" {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return nil
	}
	var shared []string
	// Each value's clusters are looked up in its index, with their hubs and
	// registrations by id (OFFSET 0 keeps PostgreSQL from joining the
	// fleet's tables by hash instead), so the cost is the organisation's;
	// "<> ''" lets it use the partial index of claims.
	err := db.Raw(`SELECT DISTINCT v.value FROM unnest(?::text[]) AS v(value)
	CROSS JOIN LATERAL (SELECT coalesce(r.org_id, h.owner_org_id, '') AS org_id FROM managed_clusters mc
		JOIN hubs h ON h.id = mc.hub_id AND h.deleted_at IS NULL
		LEFT JOIN registrations r ON r.id = mc.registration_id
		WHERE mc.`+column+` = v.value AND mc.`+column+` <> '' AND mc.deleted_at IS NULL OFFSET 0) AS o
	WHERE o.org_id <> ?`, textArray(values), scope.Caller.OrgID).Scan(&shared).Error
	if err != nil {
		return err
	}
	set := make(map[string]bool, len(shared))
	for _, v := range shared {
		set[v] = true
	}
	for i := range clusters {
		clusters[i].SharedIdentity = set[identityOf(clusters[i], column)]
	}
	return nil
}

func identityOf(c fleet.MetricsCluster, column string) string {
	if column == "name" {
		return c.Name
	}
	return c.ClusterID
}
