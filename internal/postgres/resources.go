package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// resourceRecord is one object as the ingest statement reads it.
type resourceRecord struct {
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	ClusterName     string            `json:"cluster_name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resource_version"`
	Generation      int64             `json:"generation"`
	Labels          map[string]string `json:"labels"`
	Body            map[string]any    `json:"body"`
	ContentHash     string            `json:"content_hash"`
}

// resourceKey is an object's namespace and name, as the statements read keys.
type resourceKey struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	ContentHash string `json:"content_hash,omitempty"`
}

func keysOf(keys []string) []resourceKey {
	out := make([]resourceKey, len(keys))
	for i, k := range keys {
		out[i].Namespace, out[i].Name = fleet.SplitResourceKey(k)
	}
	return out
}

// ingestResourcesSQL upserts a batch of one kind in one statement; as for
// ManagedClusters, a live row whose content hash is unchanged is not written.
const ingestResourcesSQL = `
INSERT INTO resources AS r (hub_id, zone, api_group, version, kind, namespace, name, cluster_name, uid, resource_version,
	generation, labels, body, content_hash)
SELECT ?, ?, ?, ?, ?, x.namespace, x.name, x.cluster_name, x.uid, x.resource_version, x.generation, x.labels, x.body, x.content_hash
FROM jsonb_to_recordset(?::jsonb) AS x(namespace text, name text, cluster_name text, uid text, resource_version text,
	generation bigint, labels jsonb, body jsonb, content_hash text)
ON CONFLICT (hub_id, api_group, kind, namespace, name) DO UPDATE SET
	zone = excluded.zone, version = excluded.version, cluster_name = excluded.cluster_name, uid = excluded.uid,
	resource_version = excluded.resource_version, generation = excluded.generation, labels = excluded.labels,
	body = excluded.body, content_hash = excluded.content_hash, updated_at = now(), deleted_at = NULL
WHERE r.content_hash <> excluded.content_hash OR r.deleted_at IS NOT NULL`

// ListAgentKinds returns the kinds the hub's agent is to sync: every kind of
// the generic path.
func (s *InventoryStore) ListAgentKinds(ctx context.Context, hubID, agentIdentity string) ([]fleet.ResourceKind, error) {
	if _, err := s.hubs.agentHub(s.db.Gorm.WithContext(ctx), hubID, agentIdentity, false); err != nil {
		return nil, fmt.Errorf("ListAgentKinds(%s): %w", hubID, err)
	}
	return fleet.SyncedResourceKinds(), nil
}

// IngestResources stores a batch of one kind: one statement for the upserts,
// one for the present objects, one for the deletes, and for a full resync
// one for the keys seen and (at its last batch) one for the tombstones.
func (s *InventoryStore) IngestResources(ctx context.Context, hubID, agentIdentity string, b fleet.ResourceBatch) (fleet.InventoryResult, error) {
	var res fleet.InventoryResult
	kind, ok := fleet.FindSyncedKind(b.Group, b.Kind)
	if !ok {
		return res, fmt.Errorf("IngestResources(%s): %w", hubID, fleet.Errorf(fleet.CodeValidation, "kind %s of group %q is not synced", b.Kind, b.Group))
	}
	err := s.transact(ctx, func(tx *gorm.DB) error {
		hub, err := s.hubs.agentHub(tx, hubID, agentIdentity, true)
		if err != nil {
			return err
		}
		if res, err = ingestResources(tx, hub, kind, b); err != nil {
			return err
		}
		if res.Written+res.Deleted+res.Tombstoned == 0 {
			return nil
		}
		// Wakes the change feeds' long-polls once this commits.
		return wakeAfterCommit(tx, ChannelInventory, hubID)
	})
	if err != nil {
		return res, fmt.Errorf("IngestResources(%s, %s): %w", hubID, b.Kind, err)
	}
	return res, nil
}

func ingestResources(tx *gorm.DB, hub hubRow, kind fleet.ResourceKind, b fleet.ResourceBatch) (fleet.InventoryResult, error) {
	res := fleet.InventoryResult{ContentHashes: make(map[string]string, len(b.Upserts))}
	if len(b.Upserts) > 0 {
		records := make([]resourceRecord, len(b.Upserts))
		for i, u := range b.Upserts {
			records[i] = resourceRecord{Namespace: u.Namespace, Name: u.Name, UID: u.UID, ResourceVersion: u.ResourceVersion,
				Generation: u.Generation, Labels: orEmpty(u.Labels), Body: u.Body, ContentHash: fleet.ResourceContentHash(u.Body)}
			if kind.ClusterNamespace {
				records[i].ClusterName = u.Namespace
			}
			res.ContentHashes[u.Key()] = records[i].ContentHash
		}
		written := tx.Exec(ingestResourcesSQL, hub.ID, hub.Zone, kind.Group, kind.Version, kind.Kind, jsonText(records))
		if written.Error != nil {
			return res, written.Error
		}
		res.Written, res.Unchanged = int(written.RowsAffected), len(records)-int(written.RowsAffected)
	}
	if err := confirmPresentResources(tx, hub.ID, kind, b.Present, &res); err != nil {
		return res, err
	}
	if len(b.Deletes) > 0 {
		deleted := tx.Exec(`UPDATE resources r SET deleted_at = now(), updated_at = now()
FROM jsonb_to_recordset(?::jsonb) AS d(namespace text, name text)
WHERE r.hub_id = ? AND r.api_group = ? AND r.kind = ? AND r.namespace = d.namespace AND r.name = d.name AND r.deleted_at IS NULL`,
			jsonText(keysOf(b.Deletes)), hub.ID, kind.Group, kind.Kind)
		if deleted.Error != nil {
			return res, deleted.Error
		}
		res.Deleted = int(deleted.RowsAffected)
	}
	if !b.Full {
		return res, nil
	}
	n, err := recordResourceSync(tx, hub.ID, kind, b)
	res.Tombstoned = n
	return res, err
}

// confirmPresentResources checks, in one statement, the objects reported by
// key and hash: those stored live with that hash are confirmed; the others
// are to be resent in full.
func confirmPresentResources(tx *gorm.DB, hubID string, kind fleet.ResourceKind, present []fleet.PresentCluster, res *fleet.InventoryResult) error {
	if len(present) == 0 {
		return nil
	}
	items := make([]resourceKey, len(present))
	for i, p := range present {
		items[i].Namespace, items[i].Name = fleet.SplitResourceKey(p.Name)
		items[i].ContentHash = p.ContentHash
	}
	var resend []resourceKey
	err := tx.Raw(`SELECT p.namespace, p.name FROM jsonb_to_recordset(?::jsonb) AS p(namespace text, name text, content_hash text)
LEFT JOIN resources r ON r.hub_id = ? AND r.api_group = ? AND r.kind = ? AND r.namespace = p.namespace AND r.name = p.name
	AND r.deleted_at IS NULL
WHERE r.content_hash IS DISTINCT FROM p.content_hash ORDER BY p.namespace, p.name`,
		jsonText(items), hubID, kind.Group, kind.Kind).Scan(&resend).Error
	for _, k := range resend {
		res.Resend = append(res.Resend, fleet.ResourceKey(k.Namespace, k.Name))
	}
	res.Confirmed = len(present) - len(resend)
	return err
}

// recordResourceSync remembers the keys a full resync of a kind reported;
// its last batch tombstones the kind's other objects of the hub. A resync
// whose generation is not above the last completed one is a retry and
// changes nothing more.
func recordResourceSync(tx *gorm.DB, hubID string, kind fleet.ResourceKind, b fleet.ResourceBatch) (int, error) {
	var done int64 = -1
	if err := tx.Raw(`SELECT coalesce(max(last_full_generation), -1) FROM resource_kind_syncs
WHERE hub_id = ? AND api_group = ? AND kind = ?`, hubID, kind.Group, kind.Kind).Scan(&done).Error; err != nil {
		return 0, err
	}
	if b.Generation <= done {
		return 0, nil
	}
	keys := make([]string, 0, len(b.Upserts)+len(b.Present))
	for _, u := range b.Upserts {
		keys = append(keys, u.Key())
	}
	for _, p := range b.Present {
		keys = append(keys, p.Name)
	}
	if len(keys) > 0 {
		if err := tx.Exec(`INSERT INTO resource_sync (hub_id, api_group, kind, generation, namespace, name)
SELECT ?, ?, ?, ?, k.namespace, k.name FROM jsonb_to_recordset(?::jsonb) AS k(namespace text, name text)
ON CONFLICT DO NOTHING`, hubID, kind.Group, kind.Kind, b.Generation, jsonText(keysOf(keys))).Error; err != nil {
			return 0, err
		}
	}
	if !b.Last {
		return 0, nil
	}
	tomb := tx.Exec(`UPDATE resources r SET deleted_at = now(), updated_at = now()
WHERE r.hub_id = ? AND r.api_group = ? AND r.kind = ? AND r.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM resource_sync s WHERE s.hub_id = r.hub_id AND s.api_group = r.api_group
	AND s.kind = r.kind AND s.generation = ? AND s.namespace = r.namespace AND s.name = r.name)`,
		hubID, kind.Group, kind.Kind, b.Generation)
	if tomb.Error != nil {
		return 0, tomb.Error
	}
	if err := tx.Exec(`DELETE FROM resource_sync WHERE hub_id = ? AND api_group = ? AND kind = ? AND generation <= ?`,
		hubID, kind.Group, kind.Kind, b.Generation).Error; err != nil {
		return 0, err
	}
	err := tx.Exec(`INSERT INTO resource_kind_syncs (hub_id, api_group, kind, last_full_generation) VALUES (?, ?, ?, ?)
ON CONFLICT (hub_id, api_group, kind) DO UPDATE SET last_full_generation = excluded.last_full_generation, last_full_at = now()`,
		hubID, kind.Group, kind.Kind, b.Generation).Error
	return int(tomb.RowsAffected), err
}
