package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// sqlTxReadOnlyRepeatable reads a consistent snapshot.
var sqlTxReadOnlyRepeatable = sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}

// DesiredSet returns the hub's desired set at its current revision: every
// live registration placed on it and not withdrawn, rendered as hub objects.
// The revision and the rows are read in one snapshot.
func (s *Store) DesiredSet(ctx context.Context, hubID, agentIdentity string) (fleet.DesiredSet, error) {
	set := fleet.DesiredSet{HubID: hubID}
	tx := s.db.Gorm.WithContext(ctx).Begin(&sqlTxReadOnlyRepeatable)
	if tx.Error != nil {
		return set, fmt.Errorf("DesiredSet(%s): %w", hubID, tx.Error)
	}
	defer tx.Rollback()
	hub, err := s.agentHub(tx, hubID, agentIdentity, false)
	if err != nil {
		return set, fmt.Errorf("DesiredSet(%s): %w", hubID, err)
	}
	var rows []registrationRow
	if err := registrations(tx).Where("r.hub_id = ? AND r.deleted_at IS NULL AND r.withdrawn_revision IS NULL", hubID).
		Order("r.created_at, r.id").Find(&rows).Error; err != nil {
		return set, fmt.Errorf("DesiredSet(%s): %w", hubID, err)
	}
	set.Revision = hub.Revision
	for _, r := range rows {
		creds, err := s.openCredentials(r)
		if err != nil {
			return set, fmt.Errorf("DesiredSet(%s): %w", hubID, err)
		}
		reg := r.toRegistration()
		set.Registrations = append(set.Registrations, fleet.DesiredRegistration{
			RegistrationID: reg.ID, Generation: reg.Generation, ManagedClusterName: fleet.ManagedClusterName(reg),
			Objects: fleet.DesiredObjects(reg, hubID, creds),
		})
	}
	if set.Policies, err = s.desiredPolicies(tx, hubID, hub.OwnerOrgID); err != nil {
		return set, fmt.Errorf("DesiredSet(%s): %w", hubID, err)
	}
	return set, nil
}

// desiredPolicies renders the live policies placed on a hub, oldest first.
func (s *Store) desiredPolicies(tx *gorm.DB, hubID string, owner *string) ([]fleet.DesiredPolicy, error) {
	var rows []policyRow
	if err := policies(tx).Joins("JOIN policy_hubs ph ON ph.policy_id = p.id AND ph.hub_id = ?", hubID).
		Order("p.created_at, p.id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]fleet.DesiredPolicy, len(rows))
	for i, r := range rows {
		out[i] = fleet.PolicyHubObjects(r.toPolicy(), hubID, owner != nil && *owner == r.OrgID, s.cfg.Policies)
	}
	return out, nil
}

// openCredentials decrypts a registration's auto-import credentials.
func (s *Store) openCredentials(r registrationRow) (*fleet.ImportCredentials, error) {
	if len(r.Credentials) == 0 || r.CredentialsKeyID == nil {
		return nil, nil
	}
	plain, err := s.keyring.Open(secrets.Sealed{KeyID: *r.CredentialsKeyID, Data: r.Credentials}, aad("registrations", "credentials", r.ID))
	if err != nil {
		return nil, fmt.Errorf("registration %s credentials: %w", r.ID, err)
	}
	var creds fleet.ImportCredentials
	if err := json.Unmarshal(plain, &creds); err != nil {
		return nil, fmt.Errorf("registration %s credentials: %w", r.ID, err)
	}
	return &creds, nil
}
