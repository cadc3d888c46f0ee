package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// claimPoolsSQL leases the pools named by a wake-up or due for a pass that
// no live lease holds: the woken first (a booking waits on its pool's pass,
// the resync does not), then the oldest due.
const claimPoolsSQL = `WITH woken AS (SELECT array(SELECT jsonb_array_elements_text(?::jsonb)) AS ids)
UPDATE capacity_pools p SET claimed_by = ? || '/' || gen_random_uuid(), claimed_until = now() + make_interval(secs => ?)
WHERE p.id IN (SELECT id FROM capacity_pools, woken WHERE deleted_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
	AND (next_pass_at <= now() OR id = ANY(woken.ids)) AND %s
	ORDER BY id = ANY(woken.ids) DESC, next_pass_at LIMIT ? FOR UPDATE SKIP LOCKED)
RETURNING p.*, now() AS claim_now, p.exhausted_at IS NOT NULL AND p.exhausted_at > coalesce(
	(SELECT max(c.created_at) FROM pool_clusters c WHERE c.pool_id = p.id), '-infinity') AS exhausted`

// ClaimPools leases up to limit pools that are due or named in woken, and
// reads each one's state for the scaler.
func (s *PoolStore) ClaimPools(ctx context.Context, owner string, woken []string, limit int, lease time.Duration) ([]fleet.PoolClaim, error) {
	zones, zoneArgs := s.servedZonesSQL("zone")
	var rows []poolRow
	if woken == nil {
		woken = []string{}
	}
	args := append([]any{jsonText(woken), owner, lease.Seconds()}, zoneArgs...)
	if err := s.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(claimPoolsSQL, zones), append(args, limit)...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("ClaimPools: %w", err)
	}
	out := make([]fleet.PoolClaim, 0, len(rows))
	for _, r := range rows {
		in := fleet.ScalerInput{Pool: r.toPool(), Exhausted: r.Exhausted, Now: r.ClaimNow}
		db := s.db.Gorm.WithContext(ctx)
		spec, err := s.blueprintSpec(db, r.BlueprintID, r.BlueprintVersion)
		if err != nil {
			return out, fmt.Errorf("ClaimPools(%s): %w", r.ID, err)
		}
		in.Spec = spec
		var clusters []poolClusterRow
		if err := db.Raw(poolClustersSQL+` ORDER BY pc.created_at, pc.registration_id`, r.ID).Scan(&clusters).Error; err != nil {
			return out, fmt.Errorf("ClaimPools(%s): %w", r.ID, err)
		}
		for _, c := range clusters {
			in.Clusters = append(in.Clusters, fleet.ScalerCluster{ID: c.ID, State: fleet.PoolClusterState(c.State), BlueprintVersion: c.BlueprintVersion,
				Replicas: c.Replicas, CapacityUnits: c.CapacityUnits, ReservedUnits: c.ReservedUnits, Joined: c.Joined,
				AddOnsVersion: c.AddOnsVersion, ScaledAt: c.ScaledAt, EmptySince: c.EmptySince})
		}
		out = append(out, fleet.PoolClaim{Input: in, Token: deref(r.ClaimedBy)})
	}
	return out, nil
}

// failedPassBackoffSQL is the seconds a row whose pass failed waits, from
// its attempts before this failure: doubling from one, at most five minutes.
const failedPassBackoffSQL = `least(300, 2 ^ least(attempts, 8))`

// releaseFailedClaim releases the claim on table's row id after a failed
// pass: its attempts go up, its error is kept, and its next pass backs off.
// table is a queue table's name (capacity_pools, dns_zones), never input.
func releaseFailedClaim(tx *gorm.DB, table, id string, failed error) error {
	return tx.Exec(`UPDATE `+table+` SET claimed_by = NULL, claimed_until = NULL, attempts = attempts + 1, last_error = ?,
	next_pass_at = now() + make_interval(secs => `+failedPassBackoffSQL+`) WHERE id = ?`, storableText(failed.Error()), id).Error
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// ApplyPoolPass carries out one scaler pass's actions for a claimed pool in
// one transaction, records each as an event, sets its clusters' wake points
// (fleet.WakePoints) and its conditions (fleet.PoolConditions), finishes a
// deleted pool whose
// clusters are all gone, and releases the claim with the next pass due after
// resync (after backoff when failed is set). It reports false when the claim
// was lost (its lease ended and another pass took the pool): nothing is
// written then. A ClusterAdded the organisation's limits refuse becomes, in
// actions, a ClusterNotAdded (decidePoolCluster): the caller counts and logs
// what was done, and the pool's QuotaAvailable condition says why.
func (s *PoolStore) ApplyPoolPass(ctx context.Context, claim fleet.PoolClaim, actions []fleet.ScaleAction, resync time.Duration, failed error) (bool, error) {
	pool := claim.Input.Pool
	held := false
	var applied []fleet.ScaleAction
	err := s.transact(ctx, func(tx *gorm.DB) error {
		// What this attempt applies; the caller's actions take it once it
		// committed.
		applied = slices.Clone(actions)
		var ids []string
		if err := tx.Raw(`SELECT id FROM capacity_pools WHERE id = ? AND claimed_by = ? FOR UPDATE`, pool.ID, claim.Token).Scan(&ids).Error; err != nil || len(ids) == 0 {
			return err
		}
		held = true
		if failed != nil {
			return releaseFailedClaim(tx, "capacity_pools", pool.ID, failed)
		}
		for i := range applied {
			if err := s.applyScaleAction(ctx, tx, claim.Input, &applied[i]); err != nil {
				return fmt.Errorf("%s %s: %w", applied[i].Type, applied[i].ClusterID, err)
			}
		}
		if err := recordNotAdded(tx, pool, applied); err != nil {
			return err
		}
		if err := setWakePoints(tx, fleet.WakePoints(claim.Input, applied, s.cfg.Pools.Scaler)); err != nil {
			return err
		}
		if conds := fleet.PoolConditions(pool.Conditions, claim.Input, applied, s.cfg.Pools.Scaler); !conds.Equal(pool.Conditions) {
			if err := tx.Exec(`UPDATE capacity_pools SET conditions = ? WHERE id = ?`, jsonText(conds), pool.ID).Error; err != nil {
				return err
			}
		}
		if pool.DeletionRequestedAt != nil {
			// Done once every cluster is deregistered and Hive has
			// deprovisioned it: its hub no longer reports its ClusterDeployment.
			if err := tx.Exec(`UPDATE capacity_pools SET deleted_at = now() WHERE id = ? AND NOT EXISTS (SELECT 1 FROM pool_clusters pc
	JOIN registrations r ON r.id = pc.registration_id WHERE pc.pool_id = ? AND (r.deleted_at IS NULL OR `+clusterDeploymentLive+`))`,
				pool.ID, pool.ID).Error; err != nil {
				return err
			}
		}
		return tx.Exec(`UPDATE capacity_pools SET claimed_by = NULL, claimed_until = NULL, attempts = 0, last_error = '',
	next_pass_at = now() + make_interval(secs => ?) WHERE id = ?`, resync.Seconds(), pool.ID).Error
	})
	if err != nil {
		return held, fmt.Errorf("ApplyPoolPass(%s): %w", pool.ID, err)
	}
	if held {
		copy(actions, applied)
	}
	if held && len(actions) > 0 {
		s.wake(ChannelRegistrations)
	}
	return held, nil
}

// setWakePoints records each cluster's wake point where it moved.
func setWakePoints(tx *gorm.DB, points map[string]int) error {
	if len(points) == 0 {
		return nil
	}
	type point struct {
		ID string `json:"id"`
		W  int    `json:"w"`
	}
	rows := make([]point, 0, len(points))
	for id, w := range points {
		rows = append(rows, point{id, w})
	}
	return tx.Exec(`UPDATE pool_clusters pc SET wake_at_units = x.w FROM jsonb_to_recordset(?::jsonb) AS x(id text, w integer)
WHERE pc.registration_id = x.id AND pc.wake_at_units <> x.w`, jsonText(rows)).Error
}

// applyScaleAction writes one action and its event.
func (s *PoolStore) applyScaleAction(ctx context.Context, tx *gorm.DB, in fleet.ScalerInput, a *fleet.ScaleAction) error {
	pool := in.Pool
	clusterID := a.ClusterID
	switch a.Type {
	case fleet.PoolEventClusterAdded:
		if err := s.decidePoolCluster(ctx, tx, pool); err != nil {
			if fleet.ErrorCodeOf(err) == fleet.CodeInternal {
				return err
			}
			return notAdded(a, err)
		}
		id, err := s.addPoolCluster(tx, in)
		if err != nil {
			return err
		}
		clusterID = id
	case fleet.PoolEventClusterRemoved:
		removed, err := s.removePoolCluster(tx, clusterID)
		if err != nil || !removed {
			return err // a booking took the cluster since the claim: it stays, with no event
		}
	case fleet.PoolEventNodesScaledUp, fleet.PoolEventNodesScaledDown, fleet.PoolEventClusterUpgraded:
		if err := tx.Exec(`UPDATE pool_clusters SET replicas = ?, blueprint_version = ?, scaled_at = now() WHERE registration_id = ?`,
			jsonText(a.Replicas), pool.BlueprintVersion, clusterID).Error; err != nil {
			return err
		}
		if err := republishRegistration(tx, clusterID); err != nil {
			return err
		}
	case fleet.PoolEventAddOnsDelivered:
		if err := tx.Exec(`UPDATE pool_clusters SET add_ons_version = ? WHERE registration_id = ?`, pool.BlueprintVersion, clusterID).Error; err != nil {
			return err
		}
		if err := republishRegistration(tx, clusterID); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scale action %q", a.Type)
	}
	return tx.Exec(`INSERT INTO pool_events (pool_id, cluster_id, type, reason, message) VALUES (?, ?, ?, ?, ?)`,
		pool.ID, clusterID, a.Type, a.Reason, storableText(a.Message)).Error
}

// notAdded turns a refused add into a ClusterNotAdded, whose reason and
// message (the refusal's, naming the limit) the pool's QuotaAvailable
// condition takes; recordNotAdded writes its event.
func notAdded(a *fleet.ScaleAction, refusal error) error {
	a.Type, a.Reason, a.Message, a.ClusterID = fleet.PoolEventClusterNotAdded, fleet.PoolEventReasonQuotaExceeded, fleet.ErrorMessageOf(refusal), ""
	return nil
}

// recordNotAdded records a pass's refused adds as one event, unless the
// pool's QuotaAvailable condition already says the same: a pool the limits
// hold logs one event when they start to, not one a pass.
func recordNotAdded(tx *gorm.DB, pool fleet.CapacityPool, actions []fleet.ScaleAction) error {
	i := slices.IndexFunc(actions, func(a fleet.ScaleAction) bool { return a.Type == fleet.PoolEventClusterNotAdded })
	if i < 0 {
		return nil
	}
	a := actions[i]
	if c, ok := pool.Conditions.Get(fleet.PoolConditionQuotaAvailable); ok && c.Status == fleet.ConditionFalse && c.Message == a.Message {
		return nil
	}
	return tx.Exec(`INSERT INTO pool_events (pool_id, cluster_id, type, reason, message) VALUES (?, '', ?, ?, ?)`,
		pool.ID, a.Type, a.Reason, storableText(a.Message)).Error
}

// republishRegistration moves a registration's generation so that
// provisioning_mgr publishes its objects anew.
func republishRegistration(tx *gorm.DB, id string) error {
	return tx.Exec(`UPDATE registrations SET generation = generation + 1, updated_at = now(), next_attempt_at = now(), attempts = 0
WHERE id = ? AND deleted_at IS NULL AND deletion_requested_at IS NULL`, id).Error
}

// addPoolCluster registers a new cluster of the pool: a registration of the
// pool's organisation, zone and region, owned by the pool's creator and
// labelled with the pool, which provisioning_mgr places and delivers as any
// other, and its pool_clusters row at the pool's version and initial replicas.
func (s *PoolStore) addPoolCluster(tx *gorm.DB, in fleet.ScalerInput) (string, error) {
	pool := in.Pool
	template := s.regs.newRegistrationTemplate(fleet.Identity{OrgID: pool.OrgID, Username: pool.Owner})
	for range 5 {
		row, err := s.regs.newRegistrationRow(template, fleet.RegistrationCreate{
			Name: pool.Name + "-" + randomHex(3), Labels: map[string]string{fleet.LabelPoolID: pool.ID},
			Zone: pool.Zone, Region: pool.Region, Product: fleet.ProductOCP,
		})
		if err != nil {
			return "", err
		}
		// A savepoint: a name a user's registration took fails this try only.
		err = tx.Transaction(func(sp *gorm.DB) error {
			var set struct{ ID string }
			if err := sp.Raw(insertRegistrationSQL, row.ID, row.OrgID, row.Owner, row.Name, row.DisplayName, jsonText(row.Labels), row.Zone, row.Region,
				row.Product, row.Credentials, row.CredentialsKeyID, jsonText(row.Conditions), row.Phase, row.Generation, jsonText(row.HubConditions)).
				Scan(&set).Error; err != nil {
				return err
			}
			return sp.Exec(`INSERT INTO pool_clusters (registration_id, pool_id, org_id, cluster_name, blueprint_version, replicas, capacity_units)
VALUES (?, ?, ?, ?, ?, ?, ?)`, row.ID, pool.ID, pool.OrgID, fleet.ManagedClusterName(row.toRegistration()), pool.BlueprintVersion,
				jsonText(in.Spec.InitialReplicas()), pool.UnitsPerCluster).Error
		})
		if c, ok := uniqueViolation(err); ok && c == "registrations_org_name_live" {
			continue
		}
		return row.ID, err
	}
	return "", fmt.Errorf("addPoolCluster(%s): no free cluster name after 5 tries", pool.ID)
}

// removePoolCluster marks a pool cluster removed and asks for its
// registration's deregistration (deleting_mgr withdraws its objects, the
// ClusterDeployment's deletion makes Hive deprovision it), and reports
// whether it did.
func (s *PoolStore) removePoolCluster(tx *gorm.DB, id string) (bool, error) {
	// Only while no reservation holds it: the scaler decided on what the
	// claim read, and a booking, which locks the cluster's row and skips one
	// being removed, may have come since. A pool being deleted holds none.
	var marked []string
	if err := tx.Raw(`UPDATE pool_clusters SET removing = true WHERE registration_id = ? AND reserved_units = 0 RETURNING registration_id`,
		id).Scan(&marked).Error; err != nil || len(marked) == 0 {
		return false, err
	}
	var row registrationRow
	if err := tx.Raw(`SELECT * FROM registrations WHERE id = ? AND deleted_at IS NULL FOR UPDATE`, id).Scan(&row).Error; err != nil {
		return false, err
	}
	if row.ID == "" || row.DeletionRequestedAt != nil {
		return true, nil
	}
	facts := factsOf(row)
	facts.deletionRequested = true
	return true, writeFacts(tx, id, facts, map[string]any{"updated_at": gorm.Expr("now()"), "next_attempt_at": gorm.Expr("now()"), "attempts": 0})
}
