package postgres

import (
	"encoding/json"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// poolDeliveryRow is what one pool cluster's Hive objects are made of.
type poolDeliveryRow struct {
	RegistrationID   string
	PoolID           string
	BlueprintVersion int
	Replicas         map[string]int `gorm:"serializer:json"`
	AddOnsVersion    int
	Cloud            string
	Region           string
	Credentials      []byte
	CredentialsKeyID *string
	Spec             string
}

// poolDeliveries reads, for those of the registrations ids that are pool
// clusters, what their objects are made of: the cluster's version and
// replicas, its pool's cloud, region and sealed credentials, and the spec of
// the version it runs. It looks the ids up by primary key, so it costs what
// the desired set (or delta) being rendered holds, not the fleet's pools.
func poolDeliveries(db *gorm.DB, ids []string) (map[string]poolDeliveryRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []poolDeliveryRow
	err := db.Table("pool_clusters AS pc").
		Select(`pc.registration_id, pc.pool_id, pc.blueprint_version, pc.replicas, pc.add_ons_version, p.cloud, p.region,
	p.credentials, p.credentials_key_id, v.spec::text AS spec`).
		Joins("JOIN capacity_pools p ON p.id = pc.pool_id").
		Joins("JOIN blueprint_versions v ON v.blueprint_id = p.blueprint_id AND v.version = pc.blueprint_version").
		Where("pc.registration_id IN (SELECT jsonb_array_elements_text(?::jsonb))", jsonText(ids)).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make(map[string]poolDeliveryRow, len(rows))
	for _, r := range rows {
		out[r.RegistrationID] = r
	}
	return out, nil
}

// poolClusterObjects renders a pool cluster's objects, or why they cannot
// go: credentials that cannot be opened or a stored spec that cannot be
// decoded fail this cluster only.
func (s *PoolStore) poolClusterObjects(reg fleet.Registration, hubID string, pd poolDeliveryRow) ([]map[string]any, *fleet.DeliveryFailure) {
	creds, err := s.openPoolCredentials(pd.PoolID, pd.Credentials, pd.CredentialsKeyID)
	if err != nil {
		return nil, &fleet.DeliveryFailure{RegistrationID: reg.ID, Reason: fleet.ReasonCredentialsUnreadable,
			Message: "the fleet manager cannot open the capacity pool's credentials"}
	}
	var spec fleet.BlueprintSpec
	if err := json.Unmarshal([]byte(pd.Spec), &spec); err != nil {
		return nil, &fleet.DeliveryFailure{RegistrationID: reg.ID, Reason: fleet.ReasonObjectUnreadable,
			Message: "the fleet manager cannot decode the pool's blueprint version"}
	}
	return fleet.PoolClusterObjects(reg, hubID, fleet.PoolClusterDelivery{PoolID: pd.PoolID, Cloud: fleet.Cloud(pd.Cloud), Region: pd.Region,
		BlueprintVersion: pd.BlueprintVersion, Spec: spec, Replicas: pd.Replicas, AddOns: pd.AddOnsVersion > 0, Credentials: creds}, s.cfg.Pools), nil
}
