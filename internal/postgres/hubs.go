package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// hubRow is a row of hubs.
type hubRow struct {
	ID                   string
	CreatedAt            time.Time
	UpdatedAt            time.Time
	DeletedAt            *time.Time
	Generation           int64
	Name                 string
	Zone                 string
	Region               string
	CloudProvider        string
	DeliveryMode         string
	Capacity             int
	AgentIdentity        *string
	OwnerOrgID           *string
	OCM                  *fleet.OCMTarget  `gorm:"serializer:json"`
	Hive                 *fleet.HiveTarget `gorm:"serializer:json"`
	Cordoned             bool
	Credentials          []byte
	CredentialsKeyID     *string
	Conditions           fleet.Conditions `gorm:"serializer:json"`
	LastHeartbeatAt      *time.Time
	AgentVersion         string
	AgentStartGeneration int64
	Revision             int64
	PlacedCount          int
	AppliedRevision      int64
	// WokenRevision is read only: the acknowledgement's wake-up alone
	// moves it (HubStore.wakeAcknowledged), outside the transactions that
	// save rows.
	WokenRevision      int64 `gorm:"->"`
	ResyncRequested    bool
	LastFullGeneration int64
	LastInventoryAt    *time.Time
	InventoryStale     bool
	AgentCapacity      map[string]string `gorm:"serializer:json"`
	// HeartbeatFresh is filled only by queries that compute it.
	HeartbeatFresh bool `gorm:"->"`
	// RevisionHistory is filled only by the agents' reads (agentHub).
	RevisionHistory string `gorm:"->"`
}

func (hubRow) TableName() string { return "hubs" }

func (r hubRow) toHub() fleet.Hub {
	return fleet.Hub{
		ID: r.ID, Name: r.Name, Zone: r.Zone, Region: r.Region, CloudProvider: r.CloudProvider,
		DeliveryMode: fleet.DeliveryMode(r.DeliveryMode), Capacity: r.Capacity,
		AgentIdentity: deref(r.AgentIdentity), OwnerOrgID: deref(r.OwnerOrgID), OCM: r.OCM, Hive: r.Hive, Cordoned: r.Cordoned,
		HasCredentials: len(r.Credentials) > 0, Conditions: r.Conditions, PlacedCount: r.PlacedCount,
		Revision: r.Revision, AppliedRevision: r.AppliedRevision, RevisionHistory: r.RevisionHistory, LastHeartbeatAt: r.LastHeartbeatAt,
		AgentVersion: r.AgentVersion, AgentCapacity: r.AgentCapacity, ResyncRequested: r.ResyncRequested,
		InventoryStale: r.InventoryStale, LastInventoryAt: r.LastInventoryAt, Generation: r.Generation, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// heartbeatFreshSQL is whether hub h's agent reported within the heartbeat
// timeout (its ?), by the database's clock: the one definition of a live agent.
const heartbeatFreshSQL = `coalesce(h.last_heartbeat_at > now() - make_interval(secs => ?), false)`

// hubReadySQL is when a hub takes new placements, besides room and cordon: an
// agent hub must have a fresh heartbeat (the ? is the timeout) from an agent
// that does not report itself unable to work (HubAgentReady False).
const hubReadySQL = `(h.delivery_mode <> 'agent' OR (` + heartbeatFreshSQL +
	` AND NOT h.conditions @> '[{"type": "` + fleet.ConditionHubAgentReady + `", "status": "False"}]'))`

var hubList = listSpec{
	search: SearchSchema{
		"id": {Column: "id", Type: FieldText}, "name": {Column: "name", Type: FieldText},
		"zone": {Column: "zone", Type: FieldText}, "region": {Column: "region", Type: FieldText},
		"cloud_provider": {Column: "cloud_provider", Type: FieldText}, "delivery_mode": {Column: "delivery_mode", Type: FieldText},
		"owner_org_id": {Column: "owner_org_id", Type: FieldText}, "cordoned": {Column: "cordoned", Type: FieldBool},
		"capacity": {Column: "capacity", Type: FieldInteger}, "placed_count": {Column: "placed_count", Type: FieldInteger},
		"created_at": {Column: "created_at", Type: FieldTimestamp}, "updated_at": {Column: "updated_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{
		"name": "name", "zone": "zone", "region": "region", "capacity": "capacity",
		"placed_count": "placed_count", "created_at": "created_at", "updated_at": "updated_at",
	},
	tiebreak:     "id",
	defaultOrder: "created_at",
}

// CreateHub registers a hub.
func (s *HubStore) CreateHub(ctx context.Context, create fleet.HubCreate) (fleet.Hub, error) {
	if err := create.Validate(); err != nil {
		return fleet.Hub{}, err
	}
	if err := s.cfg.Zones.Check("hub", create.Zone); err != nil {
		return fleet.Hub{}, err
	}
	row := hubRow{
		ID: newID(), Generation: 1, Name: create.Name, Zone: create.Zone, Region: create.Region,
		CloudProvider: create.CloudProvider, DeliveryMode: string(create.DeliveryMode), Capacity: create.Capacity,
		AgentIdentity: nonEmpty(create.AgentIdentity), OwnerOrgID: nonEmpty(create.OwnerOrgID), OCM: create.OCM, Hive: create.Hive,
		Conditions:    fleet.InitialHubConditions(create.DeliveryMode, s.clock.Now()),
		AgentCapacity: map[string]string{}, ResyncRequested: true, LastFullGeneration: -1,
	}
	if err := s.sealHubCredentials(&row, create.Credentials); err != nil {
		return fleet.Hub{}, err
	}
	err := s.transact(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return hubWriteError(err)
		}
		return wakeAfterCommit(tx, ChannelHubs, row.ID)
	})
	if err != nil {
		return fleet.Hub{}, fmt.Errorf("CreateHub(%s): %w", create.Name, err)
	}
	return s.FindHub(ctx, row.ID)
}

func (s *HubStore) sealHubCredentials(row *hubRow, creds map[string]string) error {
	if creds == nil {
		return nil
	}
	if len(creds) == 0 {
		row.Credentials, row.CredentialsKeyID = nil, nil
		return nil
	}
	plain, err := json.Marshal(creds)
	if err != nil {
		return err
	}
	sealed, err := s.seal(plain, "hubs", "credentials", row.ID)
	if err != nil {
		return err
	}
	row.Credentials, row.CredentialsKeyID = sealed.Data, &sealed.KeyID
	return nil
}

// hubWriteError translates unique violations of hubs.
func hubWriteError(err error) error {
	switch constraint, ok := uniqueViolation(err); {
	case ok && constraint == "hubs_name_live":
		return fleet.Errorf(fleet.CodeNameTaken, "a hub of this name already exists")
	case ok && constraint == "hubs_agent_identity_live":
		return fleet.Errorf(fleet.CodeHubIdentityTaken, "the agent identity is already bound to another hub")
	}
	return err
}

// FindHub returns a live hub of a served zone.
func (s *HubStore) FindHub(ctx context.Context, id string) (fleet.Hub, error) {
	row, err := findHub(s.inServedZones(s.db.Gorm.WithContext(ctx), "zone"), id, false)
	if err != nil {
		return fleet.Hub{}, fmt.Errorf("FindHub(%s): %w", id, err)
	}
	return row.toHub(), nil
}

func findHub(tx *gorm.DB, id string, lock bool) (hubRow, error) {
	var row hubRow
	q := tx.Where("id = ? AND deleted_at IS NULL", id)
	if lock {
		// GORM v2 takes the lock as a clause; its v1 setting
		// ("gorm:query_option") is ignored and locked nothing.
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	err := q.Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("hub", id)
	}
	return row, err
}

// ListHubs returns a page of live hubs.
func (s *HubStore) ListHubs(ctx context.Context, q fleet.ListQuery) ([]fleet.Hub, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	query := s.inServedZones(s.db.Gorm.WithContext(ctx).Model(&hubRow{}), "zone").Where("deleted_at IS NULL")
	rows, total, err := list[hubRow](query, hubList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListHubs(): %w", err)
	}
	hubs := make([]fleet.Hub, len(rows))
	for i, r := range rows {
		hubs[i] = r.toHub()
	}
	return hubs, total, nil
}

// UpdateHub changes a hub under If-Match.
func (s *HubStore) UpdateHub(ctx context.Context, id string, ifMatch *int64, update fleet.HubUpdate) (fleet.Hub, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := findHub(s.inServedZones(tx, "zone"), id, true)
		if err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, row.Generation); err != nil {
			return err
		}
		if err := update.Validate(row.toHub()); err != nil {
			return err
		}
		redeliver := deliveryChanged(row, update)
		owner := deref(row.OwnerOrgID)
		applyHubUpdate(&row, update)
		if next := deref(row.OwnerOrgID); next != "" && next != owner {
			if err := checkNoOtherTenants(tx, row.ID, next); err != nil {
				return err
			}
		}
		if err := s.sealHubCredentials(&row, derefMap(update.Credentials)); err != nil {
			return err
		}
		row.Generation++
		if err := tx.Select("*").Omit("created_at").Save(&row).Error; err != nil {
			return hubWriteError(err)
		}
		if redeliver {
			if err := requeueHubRegistrations(tx, row.ID); err != nil {
				return err
			}
		}
		if owner != deref(row.OwnerOrgID) {
			if err := ownerChanged(tx, row.ID); err != nil {
				return err
			}
		}
		return wakeAfterCommit(tx, ChannelHubs, row.ID)
	})
	if err != nil {
		return fleet.Hub{}, fmt.Errorf("UpdateHub(%s): %w", id, err)
	}
	return s.FindHub(ctx, id)
}

func applyHubUpdate(row *hubRow, u fleet.HubUpdate) {
	if u.Region != nil {
		row.Region = *u.Region
	}
	if u.CloudProvider != nil {
		row.CloudProvider = *u.CloudProvider
	}
	if u.DeliveryMode != nil {
		row.DeliveryMode = string(*u.DeliveryMode)
	}
	if u.Capacity != nil {
		row.Capacity = *u.Capacity
	}
	if u.AgentIdentity != nil {
		row.AgentIdentity = nonEmpty(*u.AgentIdentity)
	}
	if u.OwnerOrgID != nil {
		row.OwnerOrgID = nonEmpty(*u.OwnerOrgID)
	}
	if u.OCM != nil {
		row.OCM = u.OCM
	}
	if u.Hive != nil {
		row.Hive = u.Hive
	}
}

// deliveryChanged is true when an update changes how or where the hub's
// registrations are delivered: they need a pass to deliver them again.
func deliveryChanged(row hubRow, u fleet.HubUpdate) bool {
	return u.DeliveryMode != nil && string(*u.DeliveryMode) != row.DeliveryMode ||
		u.OCM != nil && (row.OCM == nil || *u.OCM != *row.OCM) ||
		u.Hive != nil && (row.Hive == nil || *u.Hive != *row.Hive) ||
		u.Credentials != nil
}

// checkNoOtherTenants refuses to give a hub to owner while another
// organisation's live registrations are placed on it: the owner would see
// their clusters and its policies would reach them. The hub's row is locked,
// and placement locks it too, so no registration lands on it meanwhile.
func checkNoOtherTenants(tx *gorm.DB, hubID, owner string) error {
	var others bool
	err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM registrations WHERE hub_id = ? AND deleted_at IS NULL AND org_id <> ?)`,
		hubID, owner).Scan(&others).Error
	if err != nil {
		return err
	}
	if others {
		return fleet.Errorf(fleet.CodeHubInUse, "the hub holds registrations of other organisations; "+
			"it can be given an owner only while every registration placed on it is that owner's")
	}
	return nil
}

// ownerChanged follows a change of a hub's owner: the policies it holds are
// written for its new owner (fleet.PolicyHubObjects), so its desired set
// moves now; and who sees its clusters changed, which places policies anew,
// so the policy resolver is woken as an inventory write wakes it.
func ownerChanged(tx *gorm.DB, hubID string) error {
	if _, _, err := bumpRevision(tx, hubID); err != nil {
		return err
	}
	return wakeAfterCommit(tx, ChannelInventory, hubID)
}

// requeueHubRegistrations makes the hub's live registrations due now (for
// provisioning_mgr or, when deregistered, deleting_mgr), and wakes them.
func requeueHubRegistrations(tx *gorm.DB, hubID string) error {
	err := tx.Exec(`UPDATE registrations SET next_attempt_at = now(), attempts = 0
WHERE hub_id = ? AND deleted_at IS NULL`, hubID).Error
	if err != nil {
		return err
	}
	return wakeAfterCommit(tx, ChannelRegistrations, hubID)
}

// SetHubCordoned stops or resumes new placements on a hub.
func (s *HubStore) SetHubCordoned(ctx context.Context, id string, cordoned bool) (fleet.Hub, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		zones, zoneArgs := s.servedZonesSQL("zone")
		res := tx.Exec(`UPDATE hubs SET cordoned = ?, updated_at = now() WHERE id = ? AND deleted_at IS NULL AND `+zones,
			append([]any{cordoned, id}, zoneArgs...)...)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return notFound("hub", id)
		}
		return wakeAfterCommit(tx, ChannelHubs, id)
	})
	if err != nil {
		return fleet.Hub{}, fmt.Errorf("SetHubCordoned(%s, %v): %w", id, cordoned, err)
	}
	return s.FindHub(ctx, id)
}

// DeleteHub soft-deletes a hub that holds no registrations.
func (s *HubStore) DeleteHub(ctx context.Context, id string) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := findHub(s.inServedZones(tx, "zone"), id, true)
		if err != nil {
			return err
		}
		var placed int64
		if err := tx.Raw(`SELECT count(*) FROM registrations WHERE hub_id = ? AND deleted_at IS NULL`, id).Scan(&placed).Error; err != nil {
			return err
		}
		if placed > 0 {
			return fleet.Errorf(fleet.CodeHubInUse, "hub %s still has %d registrations placed on it; deregister or move them first", row.Name, placed)
		}
		if err := tx.Exec(`UPDATE hubs SET deleted_at = now(), updated_at = now() WHERE id = ?`, id).Error; err != nil {
			return err
		}
		if err := tombstoneHubInventory(tx, id); err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelHubs, id)
	})
	if err != nil {
		return fmt.Errorf("DeleteHub(%s): %w", id, err)
	}
	return nil
}

// tombstoneHubInventory tombstones what a deleted hub's agent reported, so
// the change feed reports each cluster gone and the tombstone purge removes
// them after the retention, and wakes the feed's long-polls.
func tombstoneHubInventory(tx *gorm.DB, hubID string) error {
	var tombstoned int64
	for _, table := range []string{"managed_clusters", "resources"} {
		res := tx.Exec(`UPDATE `+table+` SET deleted_at = now(), updated_at = now() WHERE hub_id = ? AND deleted_at IS NULL`, hubID)
		if res.Error != nil {
			return res.Error
		}
		tombstoned += res.RowsAffected
	}
	if tombstoned == 0 {
		return nil
	}
	return wakeAfterCommit(tx, ChannelInventory, hubID)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefMap(m *map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	if *m == nil {
		return map[string]string{}
	}
	return *m
}
