package postgres

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// SyncPolicyDelivery records where this deployment delivers configuration
// policies on the hubs (--policy-namespace, --policy-cluster-set). When that
// differs from the last record (or there is none yet), it moves the
// desired-set revision of every live hub of the served zones that holds a
// policy, so that its agent applies the policies where they now belong at
// once, not at the hub's next change, and returns how many moved. Replicas
// started together with the same flags move them once: the first to record
// holds the row's lock, the others then find it current (only the very first
// record may move them twice, which costs each agent one more read).
func (s *PolicyStore) SyncPolicyDelivery(ctx context.Context) (moved int, err error) {
	want := s.cfg.Policies
	err = s.transact(ctx, func(tx *gorm.DB) error {
		var have struct{ Namespace, ClusterSet string }
		err := tx.Raw(`SELECT namespace, cluster_set FROM policy_delivery FOR UPDATE`).Take(&have).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
		case err != nil:
			return err
		case have.Namespace == want.Namespace && have.ClusterSet == want.ClusterSet:
			return nil
		}
		if err := tx.Exec(`INSERT INTO policy_delivery (namespace, cluster_set) VALUES (?, ?)
ON CONFLICT (singleton) DO UPDATE SET namespace = excluded.namespace, cluster_set = excluded.cluster_set, updated_at = now()`,
			want.Namespace, want.ClusterSet).Error; err != nil {
			return err
		}
		var hubs []string
		if err := s.inServedZones(tx.Table("hubs").Where("deleted_at IS NULL AND id IN (SELECT hub_id FROM policy_hubs)"), "zone").
			Order("id").Pluck("id", &hubs).Error; err != nil {
			return err
		}
		// In id order, as the resolver bumps them, so the two cannot deadlock.
		for _, h := range hubs {
			if _, _, err := bumpRevision(tx, h); err != nil {
				return err
			}
		}
		moved = len(hubs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("SyncPolicyDelivery(%s, %s): %w", want.Namespace, want.ClusterSet, err)
	}
	return moved, nil
}
