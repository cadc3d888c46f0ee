package postgres

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// dnsZoneDueSQL is when the zone c's oldest due record is due (NULL: none
// is); the planner reads it as the first entry of dns_records_due.
const dnsZoneDueSQL = `(SELECT min(d.next_pass_at) FROM dns_records d WHERE d.zone_id = c.id AND d.deleted_at IS NULL)`

// claimDNSZonesSQL leases the zones that no live lease holds and are past
// their backoff, with a record due or named by a wake-up: the woken first,
// then by their oldest due record.
const claimDNSZonesSQL = `WITH woken AS (SELECT array(SELECT jsonb_array_elements_text(?::jsonb)) AS ids)
UPDATE dns_zones z SET claimed_by = ? || '/' || gen_random_uuid(), claimed_until = now() + make_interval(secs => ?)
WHERE z.id IN (SELECT c.id FROM dns_zones c, woken WHERE c.deleted_at IS NULL AND (c.claimed_until IS NULL OR c.claimed_until < now())
	AND (c.next_pass_at IS NULL OR c.next_pass_at <= now()) AND (c.id = ANY(woken.ids) OR ` + dnsZoneDueSQL + ` <= now())
	ORDER BY c.id = ANY(woken.ids) DESC, ` + dnsZoneDueSQL + ` NULLS LAST, c.id LIMIT ? FOR UPDATE OF c SKIP LOCKED)
RETURNING z.*`

// dnsWorkSQL reads up to a batch of a zone's due records, oldest due first,
// with their service's name and, for a record that follows a pool cluster,
// the cluster's web console URL (its ClusterDeployment's, as
// poolClustersSQL reads it) and whether it is gone: no longer a live pool
// cluster of the record's organisation.
const dnsWorkSQL = `SELECT d.*, s.name AS service_name, coalesce(c.console_url, '') AS console_url,
	d.cluster_id <> '' AND c.registration_id IS NULL AS cluster_gone
FROM dns_records d JOIN dns_services s ON s.id = d.service_id
LEFT JOIN LATERAL (SELECT pc.registration_id, cd.body #>> '{status,webConsoleURL}' AS console_url
	FROM pool_clusters pc JOIN registrations r ON r.id = pc.registration_id
	LEFT JOIN resources cd ON cd.hub_id = r.hub_id AND cd.api_group = 'hive.openshift.io' AND cd.kind = 'ClusterDeployment'
		AND cd.namespace = pc.cluster_name AND cd.name = pc.cluster_name AND cd.deleted_at IS NULL
	WHERE d.cluster_id <> '' AND pc.registration_id = d.cluster_id AND pc.org_id = d.org_id AND NOT pc.removing
		AND r.deleted_at IS NULL AND r.deletion_requested_at IS NULL) c ON true
WHERE d.zone_id = ? AND d.deleted_at IS NULL AND d.next_pass_at <= now()
ORDER BY d.next_pass_at, d.id LIMIT ?`

// ClaimDNSZones leases up to limit zones that have records due (or are
// named in woken, not before their backoff ends) and reads up to batch of
// each one's due records, with the zone's credentials opened.
func (s *DNSStore) ClaimDNSZones(ctx context.Context, owner string, woken []string, limit, batch int, lease time.Duration) ([]fleet.DNSZoneClaim, error) {
	if woken == nil {
		woken = []string{}
	}
	db := s.db.Gorm.WithContext(ctx)
	var zones []dnsZoneRow
	if err := db.Raw(claimDNSZonesSQL, jsonText(woken), owner, lease.Seconds(), limit).Scan(&zones).Error; err != nil {
		return nil, fmt.Errorf("ClaimDNSZones: %w", err)
	}
	out := make([]fleet.DNSZoneClaim, 0, len(zones))
	for _, z := range zones {
		creds, err := s.openDNSCredentials(z.ID, z.Credentials, z.CredentialsKeyID)
		if err != nil {
			return out, fmt.Errorf("ClaimDNSZones(%s): %w", z.ID, err)
		}
		var rows []dnsRecordRow
		if err := db.Raw(dnsWorkSQL, z.ID, batch).Scan(&rows).Error; err != nil {
			return out, fmt.Errorf("ClaimDNSZones(%s): %w", z.ID, err)
		}
		claim := fleet.DNSZoneClaim{Token: deref(z.ClaimedBy), Zone: fleet.DNSZoneAccess{Zone: z.toZone(), Credentials: creds},
			Records: make([]fleet.DNSWork, len(rows)), Attempts: z.Attempts}
		for i, r := range rows {
			w := fleet.DNSWork{Record: r.toRecord(r.ServiceName), Published: r.Published, PublishedGeneration: r.PublishedGeneration,
				ChangeID: r.ChangeID, ClusterGone: r.ClusterGone, Attempts: r.Attempts}
			if r.ClusterID != "" && !r.ClusterGone {
				w.IngressHost, _ = fleet.IngressRouterHost(r.ConsoleURL)
			}
			claim.Records[i] = w
		}
		out = append(out, claim)
	}
	return out, nil
}

// dnsOutcomeRow is one outcome as CompleteDNSZone sends it to the database.
type dnsOutcomeRow struct {
	ID                  string              `json:"id"`
	Generation          int64               `json:"generation"`
	Conditions          fleet.Conditions    `json:"conditions"`
	Phase               string              `json:"phase"`
	Publish             bool                `json:"publish"`
	Published           *fleet.DNSRecordSet `json:"published"`
	PublishedGeneration int64               `json:"published_generation"`
	ChangeID            string              `json:"change_id"`
	Synced              bool                `json:"synced"`
	Requeue             float64             `json:"requeue"`
	Failed              bool                `json:"failed"`
	Delete              bool                `json:"delete"`
	LastError           string              `json:"last_error"`
}

// dnsPublishedSQL records what the provider now holds, whatever the
// record's generation: a change the pass made is a fact the next change
// must replace, even when the record changed meanwhile.
const dnsPublishedSQL = `UPDATE dns_records d SET
	published = CASE WHEN x.publish THEN x.published ELSE d.published END,
	published_generation = CASE WHEN x.publish THEN x.published_generation ELSE d.published_generation END,
	change_id = CASE WHEN x.synced THEN '' WHEN x.publish THEN x.change_id ELSE d.change_id END
FROM jsonb_to_recordset(?::jsonb) AS x(id text, publish boolean, published jsonb, published_generation bigint, change_id text, synced boolean)
WHERE d.id = x.id AND d.zone_id = ? AND d.deleted_at IS NULL AND (x.publish OR x.synced)`

// dnsOutcomeSQL records the rest of each outcome whose record is still at
// the generation the pass decided on (one changed meanwhile keeps its new
// due time): its conditions, attempts and next pass (dns_mgr's RequeueAfter,
// which sets a failed pass's backoff; a failure without one backs off as
// pool passes do), and the soft deletion of a removed record.
const dnsOutcomeSQL = `UPDATE dns_records d SET conditions = x.conditions,
	phase = x.phase,
	attempts = CASE WHEN x.failed THEN d.attempts + 1 ELSE 0 END,
	last_error = x.last_error,
	next_pass_at = CASE WHEN x.delete THEN NULL
		WHEN x.failed AND x.requeue > 0 THEN now() + make_interval(secs => x.requeue)
		WHEN x.failed THEN now() + make_interval(secs => ` + failedPassBackoffSQL + `)
		WHEN x.requeue > 0 THEN now() + make_interval(secs => x.requeue)
		WHEN d.cluster_id <> '' THEN now() + make_interval(secs => ?)
		ELSE NULL END,
	deleted_at = CASE WHEN x.delete THEN now() END
FROM jsonb_to_recordset(?::jsonb) AS x(id text, generation bigint, conditions jsonb, phase text, requeue float8, failed boolean,
	delete boolean, last_error text)
WHERE d.id = x.id AND d.zone_id = ? AND d.deleted_at IS NULL AND d.generation = x.generation`

// CompleteDNSZone records a pass's outcomes and releases the zone's claim,
// in one transaction, only while the zone is still claimed by claim: else
// it writes nothing and reports false. zoneErr backs the zone off as a
// failed pool pass is; the outcomes apply all the same.
func (s *DNSStore) CompleteDNSZone(ctx context.Context, claim fleet.DNSZoneClaim, outcomes []fleet.DNSOutcome, zoneErr error) (bool, error) {
	zoneID := claim.Zone.Zone.ID
	// The phase is derived here, by the rule every writer of it uses, with
	// the record's deletion as claimed: dnsOutcomeSQL writes only a record
	// still at the generation the pass decided on, and a deletion request
	// moves the generation.
	deleting := map[string]bool{}
	for _, w := range claim.Records {
		deleting[w.Record.ID] = w.Record.DeletionRequestedAt != nil
	}
	rows := make([]dnsOutcomeRow, len(outcomes))
	for i, o := range outcomes {
		rows[i] = dnsOutcomeRow{ID: o.ID, Generation: o.Generation, Conditions: nonNil(o.Conditions),
			Phase: fleet.DNSRecordPhase(o.Conditions, deleting[o.ID]), Publish: o.Publish, Published: o.Published,
			PublishedGeneration: o.PublishedGeneration, ChangeID: o.ChangeID, Synced: o.Synced, Requeue: o.RequeueAfter.Seconds(),
			Failed: o.Failed, Delete: o.Delete, LastError: dnsOutcomeError(o)}
	}
	resync := s.cfg.DNSResync
	if resync <= 0 { // a configuration built by hand, not validated
		resync = defaultDNSResync
	}
	held := false
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var ids []string
		if err := tx.Raw(`SELECT id FROM dns_zones WHERE id = ? AND claimed_by = ? FOR UPDATE`, zoneID, claim.Token).Scan(&ids).Error; err != nil || len(ids) == 0 {
			return err
		}
		held = true
		if len(rows) > 0 {
			if err := tx.Exec(dnsPublishedSQL, jsonText(rows), zoneID).Error; err != nil {
				return err
			}
			if err := tx.Exec(dnsOutcomeSQL, resync.Seconds(), jsonText(rows), zoneID).Error; err != nil {
				return err
			}
		}
		if zoneErr != nil {
			return releaseFailedClaim(tx, "dns_zones", zoneID, zoneErr)
		}
		return tx.Exec(`UPDATE dns_zones SET claimed_by = NULL, claimed_until = NULL, attempts = 0, last_error = '', next_pass_at = NULL
WHERE id = ?`, zoneID).Error
	})
	if err != nil {
		return held, fmt.Errorf("CompleteDNSZone(%s): %w", zoneID, err)
	}
	return held, nil
}

// dnsOutcomeError is what a failed outcome's record keeps as its last
// error: the message of its Published condition, else its Resolvable's.
func dnsOutcomeError(o fleet.DNSOutcome) string {
	if !o.Failed {
		return ""
	}
	for _, t := range []string{fleet.DNSConditionPublished, fleet.DNSConditionResolvable} {
		if c, ok := o.Conditions.Get(t); ok && c.Status != fleet.ConditionTrue && c.Message != "" {
			return storableText(c.Message)
		}
	}
	return "failed"
}
