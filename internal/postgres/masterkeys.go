package postgres

import (
	"context"
	"fmt"
	"sort"
)

// masterKeySample bounds the rows of each table whose key ids
// UnknownMasterKeys reads: a service started with another master key holds
// none of the keys, so a sample finds it out, and a bounded read keeps the
// start cheap at fleet size, however few rows hold a secret.
const masterKeySample = 10000

// UnknownMasterKeys returns, sorted, the ids of the master keys that seal
// stored values (in the first masterKeySample rows of each table) but that
// the store's keyring does not hold: a database restored or pointed at
// without its master key. serve refuses to start on any.
func (s *Store) UnknownMasterKeys(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, tc := range sealedColumns {
		var ids []string
		err := s.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(`SELECT DISTINCT key_id FROM
  (SELECT %[2]s_key_id AS key_id FROM %[1]s LIMIT %[3]d) AS sample WHERE key_id IS NOT NULL`,
			tc[0], tc[1], masterKeySample)).Scan(&ids).Error
		if err != nil {
			return nil, fmt.Errorf("UnknownMasterKeys(%s.%s): %w", tc[0], tc[1], err)
		}
		for _, id := range ids {
			if !s.keyring.Holds(id) {
				seen[id] = true
			}
		}
	}
	unknown := make([]string, 0, len(seen))
	for id := range seen {
		unknown = append(unknown, id)
	}
	sort.Strings(unknown)
	return unknown, nil
}
