package postgres

import (
	"context"
	"fmt"
	"slices"
	"sort"
)

// SealedColumn is an encrypted column: bytea, with a sibling
// <Column>_key_id, each value sealed with AAD of its row's id.
type SealedColumn struct{ Table, Column string }

// AAD is what the value of the column in row id is bound to.
func (c SealedColumn) AAD(id string) string { return aad(c.Table, c.Column, id) }

// sealedColumns are every encrypted column. TestEverySealedColumnIsRotated
// (postgres/keyrotation) compares the list with the schema, so a sealed
// column added without being listed fails.
var sealedColumns = []SealedColumn{
	{"hubs", "credentials"},
	{"registrations", "credentials"},
	{"registrations", "import_material"},
	{"capacity_pools", "credentials"},
	{"dns_zones", "credentials"},
}

// SealedColumns returns every encrypted column: those rotate-keys rotates
// and UnknownMasterKeys samples.
func SealedColumns() []SealedColumn { return slices.Clone(sealedColumns) }

// masterKeySample bounds the rows of each table whose key ids
// UnknownMasterKeys reads: a service started with another master key holds
// none of the keys, so a sample finds it out, and a bounded read keeps the
// start cheap at fleet size, however few rows hold a secret.
const masterKeySample = 10000

// UnknownMasterKeys returns, sorted, the ids of the master keys that seal
// stored values (in the first masterKeySample rows of each table) but that
// the store's keyring does not hold: a database restored or pointed at
// without its master key. serve refuses to start on any.
func (s *core) UnknownMasterKeys(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, tc := range sealedColumns {
		var ids []string
		err := s.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(`SELECT DISTINCT key_id FROM
  (SELECT %[2]s_key_id AS key_id FROM %[1]s LIMIT %[3]d) AS sample WHERE key_id IS NOT NULL`,
			tc.Table, tc.Column, masterKeySample)).Scan(&ids).Error
		if err != nil {
			return nil, fmt.Errorf("UnknownMasterKeys(%s.%s): %w", tc.Table, tc.Column, err)
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
