package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// HubCredentials opens a hub's write-only credentials for its SyncSet
// delivery; nil when it has none. Errors: CodeNotFound.
func (s *HubStore) HubCredentials(ctx context.Context, hubID string) (map[string]string, error) {
	var row hubRow
	err := s.db.Gorm.WithContext(ctx).Select("id, credentials, credentials_key_id").
		Where("id = ? AND deleted_at IS NULL", hubID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		err = notFound("hub", hubID)
	}
	if err != nil || len(row.Credentials) == 0 || row.CredentialsKeyID == nil {
		return nil, wrapErr("HubCredentials", hubID, err)
	}
	plain, err := s.keyring.Open(secrets.Sealed{KeyID: *row.CredentialsKeyID, Data: row.Credentials}, aad("hubs", "credentials", row.ID))
	if err != nil {
		return nil, fmt.Errorf("HubCredentials(%s): %w", hubID, err)
	}
	var creds map[string]string
	if err := json.Unmarshal(plain, &creds); err != nil {
		return nil, fmt.Errorf("HubCredentials(%s): %w", hubID, err)
	}
	return creds, nil
}

// RegistrationObjects renders a registration's hub-side objects for hubID
// with its import credentials opened: the objects a SyncSet carries, the same
// the hub's agent would apply. Errors: CodeNotFound.
func (s *HubStore) RegistrationObjects(ctx context.Context, hubID string, reg fleet.Registration) ([]map[string]any, error) {
	var row registrationRow
	var ids []string
	if reg.Labels[fleet.LabelPoolID] != "" {
		ids = []string{reg.ID}
	}
	pools, err := poolDeliveries(s.db.Gorm.WithContext(ctx), ids)
	if err != nil {
		return nil, wrapErr("RegistrationObjects", reg.ID, err)
	}
	if pd, ok := pools[reg.ID]; ok {
		objects, failure := s.pools.poolClusterObjects(reg, hubID, pd)
		if failure != nil {
			return nil, fmt.Errorf("RegistrationObjects(%s): %s", reg.ID, failure.Message)
		}
		return objects, nil
	}
	err = s.db.Gorm.WithContext(ctx).Select("id, credentials, credentials_key_id").
		Where("id = ? AND deleted_at IS NULL", reg.ID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		err = notFound("registration", reg.ID)
	}
	if err != nil {
		return nil, wrapErr("RegistrationObjects", reg.ID, err)
	}
	creds, err := s.openCredentials(row)
	if err != nil {
		return nil, fmt.Errorf("RegistrationObjects(%s): %w", reg.ID, err)
	}
	return fleet.DesiredObjects(reg, hubID, creds), nil
}
