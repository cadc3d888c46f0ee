package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// sealedColumns are every encrypted column: table and column name; each is
// bytea with a sibling <column>_key_id, and its values are sealed with the
// aad "<table>.<column>:<id>". TestEverySealedColumnIsRotated compares the
// list with the schema, so a sealed column added without being listed fails.
var sealedColumns = [][2]string{
	{"hubs", "credentials"},
	{"registrations", "credentials"},
	{"registrations", "import_material"},
	{"capacity_pools", "credentials"},
	{"dns_zones", "credentials"},
}

// RewrapSecrets re-wraps every stored secret not under the keyring's primary
// key, in batches, and returns how many it re-wrapped. Each row is updated
// only if it still holds what was read, so it runs safely beside serve.
func (s *Store) RewrapSecrets(ctx context.Context, batch int) (int, error) {
	return s.RotateSecrets(ctx, Rotation{Batch: batch})
}

// ReencryptSecrets opens every stored secret not under the keyring's primary
// key and seals it again under a fresh data key wrapped by the primary key,
// so that neither the old master key nor the old data keys open what is
// stored any more. Each batch is one transaction that locks its rows (a
// concurrent write waits for it, or it for the write); an interrupted run
// leaves whole batches done, and the next run takes the rest. It returns how
// many values it re-encrypted.
func (s *Store) ReencryptSecrets(ctx context.Context, batch int) (int, error) {
	return s.RotateSecrets(ctx, Rotation{Batch: batch, Reencrypt: true})
}

// Rotation is one run over the sealed columns: re-wrap (RewrapSecrets) or
// re-encrypt (ReencryptSecrets), Batch values at a time, telling Progress
// (when set) where it stands.
type Rotation struct {
	Reencrypt bool
	Batch     int
	// Progress is called for each sealed column before its first batch
	// (Done 0), after each batch, and with Finished at its end.
	Progress func(RotationProgress)
}

// RotationProgress is where a rotation stands in one sealed column.
type RotationProgress struct {
	Table, Column string
	// Done values of the column are rotated, of the Total that were under
	// another key when the column began (a value written meanwhile under an
	// old key may make Done pass it).
	Done, Total int
	Finished    bool
}

// RotateSecrets runs r over every sealed column and returns how many values
// it rotated.
func (s *Store) RotateSecrets(ctx context.Context, r Rotation) (int, error) {
	call, run := "RewrapSecrets", s.rewrapBatch
	if r.Reencrypt {
		call, run = "ReencryptSecrets", s.reencryptBatch
	}
	progress := r.Progress
	if progress == nil {
		progress = func(RotationProgress) {}
	}
	if r.Batch < 1 {
		return 0, fmt.Errorf("%s(): the batch size must be at least 1 (got %d)", call, r.Batch)
	}
	total := 0
	for _, tc := range sealedColumns {
		table, column := tc[0], tc[1]
		p := RotationProgress{Table: table, Column: column}
		if err := s.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(`SELECT count(*) FROM %[1]s WHERE %[2]s IS NOT NULL AND %[2]s_key_id <> ?`,
			table, column), s.keyring.PrimaryKeyID()).Scan(&p.Total).Error; err != nil {
			return total, fmt.Errorf("%s(%s.%s): %w", call, table, column, err)
		}
		progress(p)
		for {
			n, err := run(ctx, table, column, r.Batch)
			total += n
			p.Done += n
			if err != nil {
				return total, fmt.Errorf("%s(%s.%s): %w", call, table, column, err)
			}
			p.Finished = n < r.Batch
			progress(p)
			if p.Finished {
				break
			}
		}
	}
	return total, nil
}

// sealedRow is one stored secret as its table holds it.
type sealedRow struct {
	ID    string
	KeyID string
	Data  []byte
}

// notUnderPrimary selects up to batch values of table.column whose key is
// not the primary one, in id order.
func (s *Store) notUnderPrimary(tx *gorm.DB, table, column string, batch int, lock string) ([]sealedRow, error) {
	var rows []sealedRow
	err := tx.Raw(fmt.Sprintf(`SELECT id, %[2]s_key_id AS key_id, %[2]s AS data FROM %[1]s
WHERE %[2]s IS NOT NULL AND %[2]s_key_id <> ? ORDER BY id LIMIT ? %[3]s`, table, column, lock), s.keyring.PrimaryKeyID(), batch).Scan(&rows).Error
	return rows, err
}

func (s *Store) rewrapBatch(ctx context.Context, table, column string, batch int) (int, error) {
	rows, err := s.notUnderPrimary(s.db.Gorm.WithContext(ctx), table, column, batch, "")
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

// reencryptBatch re-seals one batch in one transaction, the rows locked from
// the read to the commit.
func (s *Store) reencryptBatch(ctx context.Context, table, column string, batch int) (int, error) {
	done := 0
	err := s.transact(ctx, func(tx *gorm.DB) error {
		rows, err := s.notUnderPrimary(tx, table, column, batch, "FOR UPDATE")
		if err != nil {
			return err
		}
		for _, r := range rows {
			where := aad(table, column, r.ID)
			plain, err := s.keyring.Open(secrets.Sealed{KeyID: r.KeyID, Data: r.Data}, where)
			if err != nil {
				return fmt.Errorf("row %s: %w", r.ID, err)
			}
			sealed, err := s.keyring.Seal(plain, where)
			clear(plain)
			if err != nil {
				return fmt.Errorf("row %s: %w", r.ID, err)
			}
			err = tx.Exec(fmt.Sprintf(`UPDATE %[1]s SET %[2]s = ?, %[2]s_key_id = ? WHERE id = ?`, table, column),
				sealed.Data, sealed.KeyID, r.ID).Error
			if err != nil {
				return err
			}
		}
		done = len(rows)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return done, nil
}
