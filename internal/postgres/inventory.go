package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// inventoryRecord is one summary as the ingest statement reads it: the
// summary's fields, the values derived from claims and conditions, and the
// content hash that decides whether the row is written at all.
type inventoryRecord struct {
	Name              string                   `json:"name"`
	UID               string                   `json:"uid"`
	ResourceVersion   string                   `json:"resource_version"`
	Labels            map[string]string        `json:"labels"`
	Claims            map[string]string        `json:"claims"`
	Capacity          map[string]string        `json:"capacity"`
	Allocatable       map[string]string        `json:"allocatable"`
	Conditions        []fleet.ClusterCondition `json:"conditions"`
	KubernetesVersion string                   `json:"kubernetes_version"`
	ClusterID         string                   `json:"cluster_id"`
	OpenShiftVersion  string                   `json:"openshift_version"`
	Platform          string                   `json:"platform"`
	Product           string                   `json:"product"`
	Region            string                   `json:"region"`
	ConsoleURL        string                   `json:"console_url"`
	Joined            string                   `json:"joined"`
	Available         string                   `json:"available"`
	RegistrationID    string                   `json:"registration_id"`
	ContentHash       string                   `json:"content_hash"`
}

// newInventoryRecord derives a record from a summary, with the summary's
// content hash that decides whether the row is written at all.
func newInventoryRecord(s fleet.ManagedClusterSummary) inventoryRecord {
	r := inventoryRecord{
		Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion, Labels: orEmpty(s.Labels), Claims: orEmpty(s.Claims),
		Capacity: orEmpty(s.Capacity), Allocatable: orEmpty(s.Allocatable), Conditions: s.Conditions,
		KubernetesVersion: s.KubernetesVersion, ClusterID: s.Claims[fleet.ClaimID], OpenShiftVersion: s.Claims[fleet.ClaimVersion],
		Platform: s.Claims[fleet.ClaimPlatform], Product: s.Claims[fleet.ClaimProduct], Region: s.Claims[fleet.ClaimRegion],
		ConsoleURL: s.Claims[fleet.ClaimConsoleURL], RegistrationID: s.Labels[fleet.LabelRegistrationID],
		Joined:      string(s.JoinedStatus()),
		Available:   string(s.ConditionStatus(fleet.HubConditionAvailable)),
		ContentHash: s.ContentHash(),
	}
	if r.Conditions == nil {
		r.Conditions = []fleet.ClusterCondition{}
	}
	return r
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// ingestSQL upserts a batch in one statement. A row whose content hash is
// unchanged (and that is neither tombstoned nor stale) is not written: the
// WHERE of DO UPDATE skips it. The registration link is kept only when the
// registration is placed on this hub, so an agent cannot claim another's.
const ingestSQL = `
INSERT INTO managed_clusters AS mc (hub_id, name, uid, resource_version, registration_id, cluster_id, labels, claims,
	capacity, allocatable, conditions, kubernetes_version, openshift_version, platform, product, region, console_url,
	joined, available, content_hash)
SELECT ?, x.name, x.uid, x.resource_version,
	(SELECT r.id FROM registrations r WHERE r.id = x.registration_id AND r.hub_id = ?),
	x.cluster_id, x.labels, x.claims, x.capacity, x.allocatable, x.conditions, x.kubernetes_version, x.openshift_version,
	x.platform, x.product, x.region, x.console_url, x.joined, x.available, x.content_hash
FROM json_to_recordset(?::json) AS x(name text, uid text, resource_version text, registration_id text, cluster_id text,
	labels jsonb, claims json, capacity json, allocatable json, conditions json, kubernetes_version text,
	openshift_version text, platform text, product text, region text, console_url text, joined text, available text,
	content_hash text)
ON CONFLICT (hub_id, name) DO UPDATE SET
	uid = excluded.uid, resource_version = excluded.resource_version, registration_id = excluded.registration_id,
	cluster_id = excluded.cluster_id, labels = excluded.labels, claims = excluded.claims, capacity = excluded.capacity,
	allocatable = excluded.allocatable, conditions = excluded.conditions, kubernetes_version = excluded.kubernetes_version,
	openshift_version = excluded.openshift_version, platform = excluded.platform, product = excluded.product,
	region = excluded.region, console_url = excluded.console_url, joined = excluded.joined, available = excluded.available,
	content_hash = excluded.content_hash, updated_at = now(), deleted_at = NULL
WHERE mc.content_hash <> excluded.content_hash OR mc.deleted_at IS NOT NULL`

// IngestInventory stores a batch of an agent's inventory: one statement for
// the upserts, one for the deletes, and for a full resync one for the names
// seen and (at its last batch) one for the tombstones.
func (s *InventoryStore) IngestInventory(ctx context.Context, hubID, agentIdentity string, b fleet.InventoryBatch) (fleet.InventoryResult, error) {
	var res fleet.InventoryResult
	err := s.transact(ctx, func(tx *gorm.DB) error {
		hub, err := s.hubs.agentHub(tx, hubID, agentIdentity, true)
		if err != nil {
			return err
		}
		if res, err = s.ingest(tx, hub, b); err != nil {
			return err
		}
		if res.Written+res.Deleted+res.Tombstoned > 0 {
			// Wakes the change feed's long-polls once this commits.
			if err := wakeAfterCommit(tx, ChannelInventory, hubID); err != nil {
				return err
			}
		}
		return tx.Exec(`UPDATE hubs SET last_inventory_at = now() WHERE id = ?`, hubID).Error
	})
	if err != nil {
		return res, fmt.Errorf("IngestInventory(%s): %w", hubID, err)
	}
	return res, nil
}

func (s *InventoryStore) ingest(tx *gorm.DB, hub hubRow, b fleet.InventoryBatch) (fleet.InventoryResult, error) {
	res := fleet.InventoryResult{ContentHashes: make(map[string]string, len(b.Upserts))}
	if len(b.Upserts) > 0 {
		records := make([]inventoryRecord, len(b.Upserts))
		for i, u := range b.Upserts {
			records[i] = newInventoryRecord(u)
			res.ContentHashes[u.Name] = records[i].ContentHash
		}
		written := tx.Exec(ingestSQL, hub.ID, hub.ID, jsonText(records))
		if written.Error != nil {
			return res, written.Error
		}
		res.Written, res.Unchanged = int(written.RowsAffected), len(records)-int(written.RowsAffected)
	}
	if err := confirmPresent(tx, hub.ID, b.Present, &res); err != nil {
		return res, err
	}
	if len(b.Deletes) > 0 {
		deleted := tx.Exec(`UPDATE managed_clusters SET deleted_at = now(), updated_at = now()
WHERE hub_id = ? AND name IN ? AND deleted_at IS NULL`, hub.ID, b.Deletes)
		if deleted.Error != nil {
			return res, deleted.Error
		}
		res.Deleted = int(deleted.RowsAffected)
	}
	if !b.Full || b.Generation <= hub.LastFullGeneration {
		// Not a full resync, or a retry of one already completed.
		return res, nil
	}
	n, err := s.recordFullSync(tx, hub.ID, b)
	res.Tombstoned = n
	return res, err
}

// confirmPresent checks, in one statement, the clusters reported by name and
// hash: those stored live with that hash cost nothing more; the others are
// to be resent in full.
func confirmPresent(tx *gorm.DB, hubID string, present []fleet.PresentCluster, res *fleet.InventoryResult) error {
	if len(present) == 0 {
		return nil
	}
	type presentJSON struct {
		Name        string `json:"name"`
		ContentHash string `json:"content_hash"`
	}
	items := make([]presentJSON, len(present))
	for i, p := range present {
		items[i] = presentJSON(p)
	}
	err := tx.Raw(`SELECT p.name FROM jsonb_to_recordset(?::jsonb) AS p(name text, content_hash text)
LEFT JOIN managed_clusters mc ON mc.hub_id = ? AND mc.name = p.name AND mc.deleted_at IS NULL
WHERE mc.content_hash IS DISTINCT FROM p.content_hash ORDER BY p.name`, jsonText(items), hubID).Scan(&res.Resend).Error
	res.Confirmed = len(present) - len(res.Resend)
	return err
}

// recordFullSync remembers the names a full resync reported; its last batch
// tombstones the hub's other clusters and closes the resync.
func (s *InventoryStore) recordFullSync(tx *gorm.DB, hubID string, b fleet.InventoryBatch) (int, error) {
	names := make([]string, 0, len(b.Upserts)+len(b.Present))
	for _, u := range b.Upserts {
		names = append(names, u.Name)
	}
	for _, p := range b.Present {
		names = append(names, p.Name)
	}
	if len(names) > 0 {
		if err := tx.Exec(`INSERT INTO inventory_sync (hub_id, generation, name)
SELECT ?, ?, jsonb_array_elements_text(?::jsonb) ON CONFLICT DO NOTHING`, hubID, b.Generation, jsonText(names)).Error; err != nil {
			return 0, err
		}
	}
	if !b.Last {
		return 0, nil
	}
	tomb := tx.Exec(`UPDATE managed_clusters mc SET deleted_at = now(), updated_at = now()
WHERE mc.hub_id = ? AND mc.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM inventory_sync s WHERE s.hub_id = mc.hub_id AND s.generation = ? AND s.name = mc.name)`, hubID, b.Generation)
	if tomb.Error != nil {
		return 0, tomb.Error
	}
	if err := tx.Exec(`DELETE FROM inventory_sync WHERE hub_id = ? AND generation <= ?`, hubID, b.Generation).Error; err != nil {
		return 0, err
	}
	err := tx.Exec(`UPDATE hubs SET last_full_generation = ?, resync_requested = false, inventory_stale = false WHERE id = ?`,
		b.Generation, hubID).Error
	return int(tomb.RowsAffected), err
}
