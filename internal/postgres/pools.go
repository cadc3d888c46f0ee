package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// ChannelPools wakes the pool reconciler: a pool or its reservations changed.
const ChannelPools = "fleet_pools"

// poolRow is a capacity pool with its clusters' totals.
type poolRow struct {
	ID                  string
	OrgID               string
	Name                string
	Zone                string
	Cloud               string
	Region              string
	BlueprintID         string
	BlueprintVersion    int
	MinClusters         int
	MaxClusters         int
	UnitsPerCluster     int
	ScaleUpPercent      int
	AddClusterPercent   int
	Credentials         []byte
	CredentialsKeyID    *string
	Generation          int64
	CreatedBy           string
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
	ExhaustedAt         *time.Time
	ClaimedBy           *string
	Conditions          fleet.Conditions `gorm:"serializer:json"`
	Clusters            int              `gorm:"->"`
	ReservedUnits       int64            `gorm:"->"`
	// ClaimNow and Exhausted are filled by ClaimPools only: the database's
	// time of the claim, and whether a booking found no room since the
	// pool's last added cluster.
	ClaimNow  time.Time `gorm:"->"`
	Exhausted bool      `gorm:"->"`
}

func (r poolRow) toPool() fleet.CapacityPool {
	return fleet.CapacityPool{ID: r.ID, OrgID: r.OrgID, Owner: r.CreatedBy, Name: r.Name, BlueprintID: r.BlueprintID,
		BlueprintVersion: r.BlueprintVersion, Cloud: fleet.Cloud(r.Cloud), Region: r.Region, Zone: r.Zone,
		MinClusters: r.MinClusters, MaxClusters: r.MaxClusters, UnitsPerCluster: r.UnitsPerCluster,
		ScaleUpPercent: r.ScaleUpPercent, AddClusterPercent: r.AddClusterPercent, HasCredentials: len(r.Credentials) > 0,
		Generation: r.Generation, Clusters: r.Clusters, ReservedUnits: r.ReservedUnits, Conditions: r.Conditions,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		DeletionRequestedAt: r.DeletionRequestedAt}
}

// pools selects live pools with their clusters' totals.
func pools(db *gorm.DB) *gorm.DB {
	return db.Table("capacity_pools AS p").Select(`p.*,
	(SELECT count(*) FROM pool_clusters c WHERE c.pool_id = p.id AND NOT c.removing) AS clusters,
	(SELECT coalesce(sum(c.reserved_units), 0) FROM pool_clusters c WHERE c.pool_id = p.id) AS reserved_units`).
		Where("p.deleted_at IS NULL")
}

var poolList = listSpec{
	search: SearchSchema{
		"id": {Column: "p.id", Type: FieldText}, "name": {Column: "p.name", Type: FieldText},
		"zone": {Column: "p.zone", Type: FieldText}, "cloud": {Column: "p.cloud", Type: FieldText},
		"region": {Column: "p.region", Type: FieldText}, "blueprint_id": {Column: "p.blueprint_id", Type: FieldText},
		"blueprint_version": {Column: "p.blueprint_version", Type: FieldInteger}, "created_by": {Column: "p.created_by", Type: FieldText},
		"created_at": {Column: "p.created_at", Type: FieldTimestamp}, "updated_at": {Column: "p.updated_at", Type: FieldTimestamp},
	},
	orderBy:      map[string]string{"name": "p.name", "created_at": "p.created_at", "updated_at": "p.updated_at"},
	tiebreak:     "p.id",
	defaultOrder: "p.created_at",
}

// CreatePool stores a capacity pool on a live version of one of the
// caller's organisation's blueprints; the pool reconciler makes its clusters.
// The Authorizer decides it with the organisation's live pools, counted
// under its pools lock, against its max_pools (decidePoolCreate).
func (s *PoolStore) CreatePool(ctx context.Context, caller fleet.Identity, create fleet.PoolCreate) (fleet.CapacityPool, error) {
	if caller.OrgID == "" {
		return fleet.CapacityPool{}, fleet.Errorf(fleet.CodeOrgNotAllowed, "the token carries no organisation")
	}
	if create.Zone == "" {
		create.Zone = s.cfg.DefaultZone
	}
	if create.Zone == "" {
		return fleet.CapacityPool{}, fleet.Errorf(fleet.CodeValidation, "zone is required")
	}
	if err := create.Validate(); err != nil {
		return fleet.CapacityPool{}, err
	}
	if err := s.cfg.Pools.CloudReady(create.Cloud); err != nil {
		return fleet.CapacityPool{}, err
	}
	if err := s.cfg.Zones.Check("capacity pool", create.Zone); err != nil {
		return fleet.CapacityPool{}, err
	}
	id := newID()
	sealed, err := s.sealPoolCredentials(create.Credentials, id)
	if err != nil {
		return fleet.CapacityPool{}, err
	}
	subject := fleet.SubjectFromContext(ctx, caller)
	err = s.transact(ctx, func(tx *gorm.DB) error {
		if err := s.decidePoolCreate(ctx, tx, subject); err != nil {
			return err
		}
		if err := s.checkBlueprintVersion(tx, caller.OrgID, create.BlueprintID, create.BlueprintVersion); err != nil {
			return err
		}
		err := tx.Exec(`INSERT INTO capacity_pools (id, org_id, name, zone, cloud, region, blueprint_id, blueprint_version,
	min_clusters, max_clusters, units_per_cluster, scale_up_percent, add_cluster_percent, credentials, credentials_key_id, created_by)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, caller.OrgID, create.Name, create.Zone, string(create.Cloud), create.Region, create.BlueprintID, create.BlueprintVersion,
			create.MinClusters, create.MaxClusters, create.UnitsPerCluster, create.ScaleUpPercent, create.AddClusterPercent,
			sealed.Data, sealed.KeyID, caller.Username).Error
		if c, ok := uniqueViolation(err); ok && c == "capacity_pools_org_name" {
			return fleet.Errorf(fleet.CodeNameTaken, "a capacity pool of this name already exists in this organisation")
		}
		if err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelPools, id)
	})
	if err != nil {
		return fleet.CapacityPool{}, fmt.Errorf("CreatePool(%s/%s): %w", caller.OrgID, create.Name, err)
	}
	return s.FindPool(ctx, caller.OrgID, id)
}

// checkBlueprintVersion locks the organisation's blueprint (so it cannot be
// deleted under the pool) and checks the version is live.
func (s *PoolStore) checkBlueprintVersion(tx *gorm.DB, org, id string, version int) error {
	if _, err := s.blueprints.lockBlueprint(tx, org, id); err != nil {
		return fleet.Errorf(fleet.CodeValidation, "blueprint_id names no blueprint of the organisation")
	}
	var n int64
	if err := tx.Table("blueprint_versions").Where("blueprint_id = ? AND version = ? AND deleted_at IS NULL", id, version).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return fleet.Errorf(fleet.CodeValidation, "blueprint_version names no live version of the blueprint")
	}
	return nil
}

// sealPoolCredentials seals a pool's credentials to its row.
func (s *PoolStore) sealPoolCredentials(creds *fleet.PoolCredentials, id string) (secrets.Sealed, error) {
	plain, err := json.Marshal(creds)
	if err != nil {
		return secrets.Sealed{}, err
	}
	return s.seal(plain, "capacity_pools", "credentials", id)
}

// openPoolCredentials opens a pool's sealed credentials.
func (s *PoolStore) openPoolCredentials(id string, data []byte, keyID *string) (*fleet.PoolCredentials, error) {
	if len(data) == 0 || keyID == nil {
		return nil, nil
	}
	plain, err := s.keyring.Open(secrets.Sealed{KeyID: *keyID, Data: data}, aad("capacity_pools", "credentials", id))
	if err != nil {
		return nil, fmt.Errorf("capacity pool %s credentials: %w", id, err)
	}
	var creds fleet.PoolCredentials
	if err := json.Unmarshal(plain, &creds); err != nil {
		return nil, fmt.Errorf("capacity pool %s credentials: %w", id, err)
	}
	return &creds, nil
}

// ListPools returns a page of the organisation's live pools.
func (s *PoolStore) ListPools(ctx context.Context, org string, q fleet.ListQuery) ([]fleet.CapacityPool, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	query := s.inServedZones(pools(s.db.Gorm.WithContext(ctx)).Where("p.org_id = ?", org), "p.zone")
	rows, total, err := list[poolRow](query, poolList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListPools(%s): %w", org, err)
	}
	out := make([]fleet.CapacityPool, len(rows))
	for i, r := range rows {
		out[i] = r.toPool()
	}
	return out, total, nil
}

// FindPool returns one of the organisation's live pools.
func (s *PoolStore) FindPool(ctx context.Context, org, id string) (fleet.CapacityPool, error) {
	var row poolRow
	err := s.inServedZones(pools(s.db.Gorm.WithContext(ctx)).Where("p.org_id = ? AND p.id = ?", org, id), "p.zone").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.CapacityPool{}, notFound("capacity pool", id)
	}
	if err != nil {
		return fleet.CapacityPool{}, fmt.Errorf("FindPool(%s/%s): %w", org, id, err)
	}
	return row.toPool(), nil
}

// lockPool locks one of the organisation's live pools in tx.
func (s *PoolStore) lockPool(tx *gorm.DB, org, id string) (poolRow, error) {
	var row poolRow
	zones, zoneArgs := s.servedZonesSQL("zone")
	err := tx.Raw(`SELECT * FROM capacity_pools WHERE id = ? AND org_id = ? AND deleted_at IS NULL AND `+zones+` FOR UPDATE`,
		append([]any{id, org}, zoneArgs...)...).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("capacity pool", id)
	}
	return row, err
}

// UpdatePool changes a pool under If-Match: its blueprint version (new
// clusters use it, existing ones are moved to it), bounds, thresholds or
// credentials.
func (s *PoolStore) UpdatePool(ctx context.Context, permit fleet.Permit, org, id string, match *int64, update fleet.PoolUpdate) (fleet.CapacityPool, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockPool(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, row.authzResource()); err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		if row.DeletionRequestedAt != nil {
			return fleet.Errorf(fleet.CodeConflict, "the capacity pool is being deleted")
		}
		next, err := update.Apply(row.toPool())
		if err != nil {
			return err
		}
		if next.BlueprintVersion != row.BlueprintVersion {
			if err := s.checkBlueprintVersion(tx, org, row.BlueprintID, next.BlueprintVersion); err != nil {
				return err
			}
		}
		set := map[string]any{"blueprint_version": next.BlueprintVersion, "min_clusters": next.MinClusters, "max_clusters": next.MaxClusters,
			"scale_up_percent": next.ScaleUpPercent, "add_cluster_percent": next.AddClusterPercent,
			"generation": gorm.Expr("generation + 1"), "updated_at": gorm.Expr("now()"), "next_pass_at": gorm.Expr("now()")}
		if update.Credentials != nil {
			sealed, err := s.sealPoolCredentials(update.Credentials, id)
			if err != nil {
				return err
			}
			set["credentials"], set["credentials_key_id"] = sealed.Data, sealed.KeyID
			// Every cluster's secrets change: publish them anew.
			if err := republishPoolClusters(tx, id); err != nil {
				return err
			}
		}
		if err := tx.Table("capacity_pools").Where("id = ?", id).Updates(set).Error; err != nil {
			return err
		}
		if err := wakeAfterCommit(tx, ChannelRegistrations, id); err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelPools, id)
	})
	if err != nil {
		return fleet.CapacityPool{}, fmt.Errorf("UpdatePool(%s/%s): %w", org, id, err)
	}
	return s.FindPool(ctx, org, id)
}

// authzResource is the pool as the Authorizer sees it.
func (r poolRow) authzResource() fleet.AuthzResource {
	return fleet.AuthzResource{Kind: "pool", ID: r.ID, OrgID: r.OrgID, CreatedBy: r.CreatedBy}
}

// republishPoolClusters moves the generation of every live cluster of a
// pool, so provisioning_mgr publishes its objects anew.
func republishPoolClusters(tx *gorm.DB, poolID string) error {
	return tx.Exec(`UPDATE registrations SET generation = generation + 1, updated_at = now(), next_attempt_at = now(), attempts = 0
WHERE id IN (SELECT registration_id FROM pool_clusters WHERE pool_id = ? AND NOT removing) AND deleted_at IS NULL AND deletion_requested_at IS NULL`, poolID).Error
}

// RequestPoolDeletion starts a pool's deletion: the pool reconciler
// deregisters its clusters (Hive deprovisions them) and deletes the pool
// when the last is gone. Reservations still held refuse it.
func (s *PoolStore) RequestPoolDeletion(ctx context.Context, permit fleet.Permit, org, id string, match *int64) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockPool(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, row.authzResource()); err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		if row.DeletionRequestedAt != nil {
			return nil
		}
		var held int64
		if err := tx.Table("reservations").Where("pool_id = ?", id).Count(&held).Error; err != nil {
			return err
		}
		if held > 0 {
			return fleet.Errorf(fleet.CodeConflict, "the capacity pool holds %d reservations; release them first", held)
		}
		if err := tx.Exec(`UPDATE capacity_pools SET deletion_requested_at = now(), updated_at = now(), generation = generation + 1,
	next_pass_at = now() WHERE id = ?`, id).Error; err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelPools, id)
	})
	if err != nil {
		return fmt.Errorf("RequestPoolDeletion(%s/%s): %w", org, id, err)
	}
	return nil
}

// poolClusterRow is one cluster of a pool as poolClustersSQL reads it.
type poolClusterRow struct {
	ID               string
	PoolID           string
	ClusterName      string
	Name             string
	State            string
	HubID            *string
	HubName          *string
	HubZone          *string
	HubRegion        *string
	BlueprintVersion int
	Replicas         map[string]int `gorm:"serializer:json"`
	Nodes            map[string]int `gorm:"serializer:json"`
	CapacityUnits    int
	ReservedUnits    int
	FreeUnits        int
	AddOnsVersion    int
	Joined           bool
	ScaledAt         *time.Time
	EmptySince       *time.Time
	APIURL           string `gorm:"column:api_url"`
	ConsoleURL       string
	Capacity         map[string]any      `gorm:"serializer:json"`
	Allocatable      map[string]any      `gorm:"serializer:json"`
	AddOns           []fleet.AddOnStatus `gorm:"serializer:json"`
	CreatedAt        time.Time
}

// clusterDeploymentLive is true while the hub of the pool cluster pc (of
// registration r) reports its ClusterDeployment: after the cluster's
// deregistration, until Hive has deprovisioned it. Saying that the cluster
// name is not empty, true of every pool cluster, lets the planner use the
// partial index resources_cluster, as in poolClustersSQL.
const clusterDeploymentLive = `EXISTS (SELECT 1 FROM resources x WHERE x.cluster_name = pc.cluster_name AND x.cluster_name <> '' AND x.hub_id = r.hub_id
	AND x.api_group = 'hive.openshift.io' AND x.kind = 'ClusterDeployment' AND x.deleted_at IS NULL)`

// The pool cluster rules, written once. A cluster is in service (listed
// ready or scaling, and takes bookings) when it is not going, not failed and
// its hub reports it joined; it is being made (listed provisioning) when it
// is not going, not failed and not yet joined. poolClustersSQL derives the
// listed state from the same fragments, so a booking goes only where the
// list says ready or scaling, and a pool is marked exhausted only when none
// of its clusters is listed provisioning. Each fragment reads pool_clusters
// as pc and the cluster's registration as r.
const (
	poolClusterGoingSQL  = `(pc.removing OR r.deletion_requested_at IS NOT NULL OR r.deleted_at IS NOT NULL)`
	poolClusterFailedSQL = `(r.phase = '` + string(fleet.PhaseFailed) + `' OR EXISTS (SELECT 1 FROM resources f,
		jsonb_array_elements(CASE WHEN jsonb_typeof(f.body #> '{status,conditions}') = 'array' THEN f.body #> '{status,conditions}' ELSE '[]' END) k
		WHERE f.hub_id = r.hub_id AND f.api_group = 'hive.openshift.io' AND f.kind = 'ClusterDeployment'
			AND f.namespace = pc.cluster_name AND f.name = pc.cluster_name AND f.deleted_at IS NULL
			AND k ->> 'type' = 'ProvisionFailed' AND k ->> 'status' = 'True'))`
	poolClusterJoinedSQL    = `r.hub_conditions @> '[{"type": "Joined", "status": "True"}]'`
	poolClusterInServiceSQL = `NOT ` + poolClusterGoingSQL + ` AND NOT ` + poolClusterFailedSQL + ` AND ` + poolClusterJoinedSQL
	poolClusterBeingMadeSQL = `NOT ` + poolClusterGoingSQL + ` AND NOT ` + poolClusterFailedSQL + ` AND NOT ` + poolClusterJoinedSQL
)

// poolClustersSQL reads a pool's clusters: the pool's columns, the
// registration's phase, hub and whether the hub reports it joined, what the
// hub reports of the cluster's Hive objects (a MachinePool's
// status.replicas, the ClusterDeployment's URLs and ProvisionFailed
// condition) and of its add-ons' ManifestWorks (their Applied condition),
// and its ManagedCluster's capacity. The state is derived here,
// once, so lists search and order by it. A joined cluster stays ready (or
// scaling) while a change of its objects is being delivered, as it serves
// meanwhile; a deregistered one is listed, deprovisioning, until its hub no
// longer reports its ClusterDeployment.
const poolClustersSQL = `SELECT pc.registration_id AS id, pc.pool_id, pc.cluster_name, r.name, r.hub_id, h.name AS hub_name,
	h.zone AS hub_zone, h.region AS hub_region, pc.blueprint_version, pc.replicas, coalesce(mp.nodes, '{}') AS nodes,
	pc.capacity_units, pc.reserved_units, pc.capacity_units - pc.reserved_units AS free_units, pc.add_ons_version,
	` + poolClusterJoinedSQL + ` AS joined, pc.scaled_at, pc.empty_since, pc.created_at,
	coalesce(cd.body #>> '{status,apiURL}', '') AS api_url, coalesce(cd.body #>> '{status,webConsoleURL}', '') AS console_url,
	coalesce(mc.capacity, '{}') AS capacity, coalesce(mc.allocatable, '{}') AS allocatable, coalesce(aw.add_ons, '[]') AS add_ons,
	CASE WHEN ` + poolClusterGoingSQL + ` THEN 'deprovisioning'
		WHEN ` + poolClusterFailedSQL + ` THEN 'failed'
		WHEN NOT ` + poolClusterJoinedSQL + ` THEN 'provisioning'
		WHEN EXISTS (SELECT 1 FROM jsonb_each_text(pc.replicas) d
			WHERE (mp.nodes ->> d.key) IS NOT NULL AND (mp.nodes ->> d.key) <> d.value) THEN 'scaling'
		ELSE 'ready' END AS state
FROM pool_clusters pc
JOIN registrations r ON r.id = pc.registration_id AND (r.deleted_at IS NULL OR ` + clusterDeploymentLive + `)
LEFT JOIN hubs h ON h.id = r.hub_id
LEFT JOIN LATERAL (SELECT jsonb_object_agg(x.body #>> '{spec,name}', least(greatest((x.body #>> '{status,replicas}')::numeric, 0), 100000)::int) AS nodes
	FROM resources x WHERE x.cluster_name = pc.cluster_name AND x.cluster_name <> '' AND x.hub_id = r.hub_id AND x.deleted_at IS NULL
		AND x.api_group = 'hive.openshift.io' AND x.kind = 'MachinePool'
		AND jsonb_typeof(x.body #> '{status,replicas}') = 'number' AND jsonb_typeof(x.body #> '{spec,name}') = 'string') mp ON true
LEFT JOIN resources cd ON cd.hub_id = r.hub_id AND cd.api_group = 'hive.openshift.io' AND cd.kind = 'ClusterDeployment'
	AND cd.namespace = pc.cluster_name AND cd.name = pc.cluster_name AND cd.deleted_at IS NULL
LEFT JOIN LATERAL (SELECT jsonb_agg(jsonb_build_object('name', substr(x.name, 7), 'applied', coalesce(ac.status, 'Unknown'),
		'available', CASE WHEN av.status IN ('True', 'False') THEN av.status ELSE 'Unknown' END, 'reason', coalesce(ac.reason, ''), 'message', left(CASE WHEN ac.status = 'False' AND rf.message IS NOT NULL THEN rf.message
			ELSE coalesce(ac.message, '') END, 1024)) ORDER BY x.name) AS add_ons
	FROM resources x LEFT JOIN LATERAL (SELECT k ->> 'status' AS status, k ->> 'reason' AS reason, k ->> 'message' AS message
		FROM jsonb_array_elements(CASE WHEN jsonb_typeof(x.body #> '{status,conditions}') = 'array'
			THEN x.body #> '{status,conditions}' ELSE '[]' END) k WHERE k ->> 'type' = 'Applied' LIMIT 1) ac ON true
	LEFT JOIN LATERAL (SELECT k ->> 'status' AS status FROM jsonb_array_elements(CASE WHEN jsonb_typeof(x.body #> '{status,conditions}') = 'array'
			THEN x.body #> '{status,conditions}' ELSE '[]' END) k WHERE k ->> 'type' = 'Available' LIMIT 1) av ON true
	-- OCM's work agent sums a refusal up in the work's condition and says
	-- what the cluster refused, and why, in each manifest's own.
	LEFT JOIN LATERAL (SELECT string_agg(mk ->> 'message', '; ' ORDER BY m.i) AS message
		FROM jsonb_array_elements(CASE WHEN jsonb_typeof(x.body #> '{status,resourceStatus,manifests}') = 'array'
			THEN x.body #> '{status,resourceStatus,manifests}' ELSE '[]' END) WITH ORDINALITY m(v, i),
		jsonb_array_elements(CASE WHEN jsonb_typeof(m.v -> 'conditions') = 'array' THEN m.v -> 'conditions' ELSE '[]' END) mk
		WHERE mk ->> 'type' = 'Applied' AND mk ->> 'status' = 'False' AND coalesce(mk ->> 'message', '') <> '') rf ON true
	WHERE x.cluster_name = pc.cluster_name AND x.cluster_name <> '' AND x.hub_id = r.hub_id AND x.deleted_at IS NULL
		AND x.api_group = 'work.open-cluster-management.io' AND x.kind = 'ManifestWork' AND x.name LIKE 'addon-%') aw ON true
LEFT JOIN LATERAL (SELECT m.capacity, m.allocatable FROM managed_clusters m
	WHERE m.registration_id = pc.registration_id AND m.deleted_at IS NULL ORDER BY m.updated_at DESC LIMIT 1) mc ON true
WHERE pc.pool_id = ?`

func (r poolClusterRow) toPoolCluster(spec *fleet.BlueprintSpec) fleet.PoolCluster {
	c := fleet.PoolCluster{ID: r.ID, PoolID: r.PoolID, Name: r.Name, State: fleet.PoolClusterState(r.State), BlueprintVersion: r.BlueprintVersion,
		Replicas: r.Replicas, Nodes: r.Nodes, CapacityUnits: r.CapacityUnits, ReservedUnits: r.ReservedUnits, HoldableUnits: r.CapacityUnits,
		APIURL: r.APIURL, ConsoleURL: r.ConsoleURL, Capacity: stringValues(r.Capacity), Allocatable: stringValues(r.Allocatable), AddOns: r.AddOns,
		CreatedAt: r.CreatedAt, ScaledAt: r.ScaledAt}
	if spec != nil {
		c.HoldableUnits = fleet.HoldableUnits(*spec, r.Replicas, r.CapacityUnits)
	}
	if r.HubID != nil {
		c.Hub = &fleet.HubRef{ID: *r.HubID, Name: deref(r.HubName), Zone: deref(r.HubZone), Region: deref(r.HubRegion)}
	}
	return c
}

// stringValues keeps the string values of a reported capacity map.
func stringValues(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

var poolClusterList = listSpec{
	search: SearchSchema{
		"id": {Column: "c.id", Type: FieldText}, "name": {Column: "c.name", Type: FieldText}, "state": {Column: "c.state", Type: FieldText},
		"hub_id": {Column: "c.hub_id", Type: FieldText}, "hub_name": {Column: "c.hub_name", Type: FieldText},
		"blueprint_version": {Column: "c.blueprint_version", Type: FieldInteger},
		"capacity_units":    {Column: "c.capacity_units", Type: FieldInteger}, "reserved_units": {Column: "c.reserved_units", Type: FieldInteger},
		"free_units": {Column: "c.free_units", Type: FieldInteger}, "created_at": {Column: "c.created_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{"name": "c.name", "state": "c.state", "free_units": "c.free_units", "reserved_units": "c.reserved_units",
		"created_at": "c.created_at", "hub_name": "c.hub_name"},
	tiebreak:     "c.id",
	defaultOrder: "c.created_at",
}

// ListPoolClusters returns a page of one of the organisation's pools' clusters.
func (s *PoolStore) ListPoolClusters(ctx context.Context, org, poolID string, q fleet.ListQuery) ([]fleet.PoolCluster, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	pool, err := s.FindPool(ctx, org, poolID)
	if err != nil {
		return nil, 0, err
	}
	db := s.db.Gorm.WithContext(ctx)
	spec, err := s.blueprintSpec(db, pool.BlueprintID, pool.BlueprintVersion)
	if err != nil {
		return nil, 0, fmt.Errorf("ListPoolClusters(%s/%s): %w", org, poolID, err)
	}
	rows, total, err := list[poolClusterRow](db.Table("("+poolClustersSQL+") AS c", poolID), poolClusterList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListPoolClusters(%s/%s): %w", org, poolID, err)
	}
	out := make([]fleet.PoolCluster, len(rows))
	for i, r := range rows {
		out[i] = r.toPoolCluster(&spec)
	}
	return out, total, nil
}

// blueprintSpec reads one version's spec.
func (s *PoolStore) blueprintSpec(db *gorm.DB, id string, version int) (fleet.BlueprintSpec, error) {
	var raw string
	var spec fleet.BlueprintSpec
	if err := db.Raw(`SELECT spec::text FROM blueprint_versions WHERE blueprint_id = ? AND version = ?`, id, version).Scan(&raw).Error; err != nil {
		return spec, err
	}
	if raw == "" {
		return spec, fmt.Errorf("blueprint %s version %d is missing", id, version)
	}
	return spec, json.Unmarshal([]byte(raw), &spec)
}

var poolEventList = listSpec{
	search: SearchSchema{"type": {Column: "e.type", Type: FieldText}, "reason": {Column: "e.reason", Type: FieldText},
		"cluster_id": {Column: "e.cluster_id", Type: FieldText}, "at": {Column: "e.at", Type: FieldTimestamp}},
	orderBy: map[string]string{"at": "e.at", "type": "e.type"}, tiebreak: "e.id DESC", defaultOrder: "e.at DESC",
}

// ListPoolEvents returns a page of a pool's events, newest first.
func (s *PoolStore) ListPoolEvents(ctx context.Context, org, poolID string, q fleet.ListQuery) ([]fleet.PoolEvent, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.FindPool(ctx, org, poolID); err != nil {
		return nil, 0, err
	}
	type eventRow struct {
		ID                                   int64
		PoolID, ClusterID, Type, Reason, Msg string
		At                                   time.Time
	}
	rows, total, err := list[eventRow](s.db.Gorm.WithContext(ctx).Table("pool_events AS e").
		Select("e.id, e.pool_id, e.cluster_id, e.type, e.reason, e.message AS msg, e.at").Where("e.pool_id = ?", poolID), poolEventList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListPoolEvents(%s/%s): %w", org, poolID, err)
	}
	out := make([]fleet.PoolEvent, len(rows))
	for i, r := range rows {
		out[i] = fleet.PoolEvent{ID: r.ID, PoolID: r.PoolID, ClusterID: r.ClusterID, Type: r.Type, Reason: r.Reason, Message: r.Msg, At: r.At}
	}
	return out, total, nil
}
