package postgres

import (
	"context"
	"fmt"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// sealedColumns are every encrypted column: table and column name; each has a
// sibling <column>_key_id.
var sealedColumns = [][2]string{{"hubs", "credentials"}, {"registrations", "credentials"}}

// RewrapSecrets re-wraps every stored secret not under the keyring's primary
// key, in batches, and returns how many it re-wrapped. Each row is updated
// only if it still holds what was read, so it runs safely beside serve.
func (s *Store) RewrapSecrets(ctx context.Context, batch int) (int, error) {
	if batch < 1 {
		return 0, fmt.Errorf("RewrapSecrets(): the batch size must be at least 1 (got %d)", batch)
	}
	total := 0
	for _, tc := range sealedColumns {
		for {
			n, err := s.rewrapBatch(ctx, tc[0], tc[1], batch)
			total += n
			if err != nil {
				return total, fmt.Errorf("RewrapSecrets(%s.%s): %w", tc[0], tc[1], err)
			}
			if n < batch {
				break
			}
		}
	}
	return total, nil
}

func (s *Store) rewrapBatch(ctx context.Context, table, column string, batch int) (int, error) {
	var rows []struct {
		ID    string
		KeyID string
		Data  []byte
	}
	primary := s.keyring.PrimaryKeyID()
	err := s.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(`SELECT id, %[2]s_key_id AS key_id, %[2]s AS data FROM %[1]s
WHERE %[2]s IS NOT NULL AND %[2]s_key_id <> ? ORDER BY id LIMIT ?`, table, column), primary, batch).Scan(&rows).Error
	if err != nil {
		return 0, err
	}
	rewrapped := 0
	for _, r := range rows {
		sealed, _, err := s.keyring.Rewrap(secrets.Sealed{KeyID: r.KeyID, Data: r.Data}, aad(table, column, r.ID))
		if err != nil {
			return rewrapped, fmt.Errorf("row %s: %w", r.ID, err)
		}
		// Only if the row still holds what was read: a value written meanwhile wins.
		res := s.db.Gorm.WithContext(ctx).Exec(fmt.Sprintf(`UPDATE %[1]s SET %[2]s = ?, %[2]s_key_id = ?
WHERE id = ? AND %[2]s_key_id = ? AND %[2]s = ?`, table, column), sealed.Data, sealed.KeyID, r.ID, r.KeyID, r.Data)
		if res.Error != nil {
			return rewrapped, res.Error
		}
		rewrapped += int(res.RowsAffected)
	}
	if len(rows) == batch && rewrapped == 0 {
		return 0, fmt.Errorf("a whole batch of %s.%s changed under rotate-keys; run it again", table, column)
	}
	return len(rows), nil
}
