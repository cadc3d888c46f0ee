// Package keyrotation rotates the stored secrets to the keyring's primary
// master key, for `fleet-manager rotate-keys`: it re-wraps each value's data
// key, or re-encrypts the value under a fresh one, in every sealed column
// the store declares (postgres.SealedColumns), batch by batch, beside a
// running serve (docs/operations.md).
package keyrotation

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// Rotator rotates the secrets stored in db to keyring's primary key;
// keyring must also hold the keys they are under now.
type Rotator struct {
	db      *postgres.DB
	keyring *secrets.Keyring
}

// New returns the rotator of the secrets in db.
func New(db *postgres.DB, keyring *secrets.Keyring) *Rotator {
	return &Rotator{db: db, keyring: keyring}
}

// RewrapSecrets re-wraps every stored secret not under the keyring's primary
// key, in batches, and returns how many it re-wrapped. Each row is updated
// only if it still holds what was read, so it runs safely beside serve.
func (k *Rotator) RewrapSecrets(ctx context.Context, batch int) (int, error) {
	return k.RotateSecrets(ctx, Rotation{Batch: batch})
}

// ReencryptSecrets opens every stored secret not under the keyring's primary
// key and seals it again under a fresh data key wrapped by the primary key,
// so that neither the old master key nor the old data keys open what is
// stored any more. Each batch is one transaction that locks its rows (a
// concurrent write waits for it, or it for the write); an interrupted run
// leaves whole batches done, and the next run takes the rest. It returns how
// many values it re-encrypted.
func (k *Rotator) ReencryptSecrets(ctx context.Context, batch int) (int, error) {
	return k.RotateSecrets(ctx, Rotation{Batch: batch, Reencrypt: true})
}

// Rotation is one run over the sealed columns: re-wrap (RewrapSecrets) or
// re-encrypt (ReencryptSecrets), Batch values at a time, telling Progress
// (when set) where it stands.
type Rotation struct {
	Reencrypt bool
	Batch     int
	// Progress is called for each sealed column before its first batch
	// (Done 0), after each batch, and with Finished at its end.
	Progress func(Progress)
}

// Progress is where a rotation stands in one sealed column.
type Progress struct {
	Table, Column string
	// Done values of the column are rotated, of the Total that were under
	// another key when the column began (a value written meanwhile under an
	// old key may make Done pass it).
	Done, Total int
	Finished    bool
}

// RotateSecrets runs r over every sealed column and returns how many values
// it rotated.
func (k *Rotator) RotateSecrets(ctx context.Context, r Rotation) (int, error) {
	call, run := "RewrapSecrets", k.rewrapBatch
	if r.Reencrypt {
		call, run = "ReencryptSecrets", k.reencryptBatch
	}
	progress := r.Progress
	if progress == nil {
		progress = func(Progress) {}
	}
	if r.Batch < 1 {
		return 0, fmt.Errorf("%s(): the batch size must be at least 1 (got %d)", call, r.Batch)
	}
	total := 0
	for _, sc := range postgres.SealedColumns() {
		table, column := sc.Table, sc.Column
		p := Progress{Table: table, Column: column}
		if err := k.db.Gorm.WithContext(ctx).Raw(fmt.Sprintf(`SELECT count(*) FROM %[1]s WHERE %[2]s IS NOT NULL AND %[2]s_key_id <> ?`,
			table, column), k.keyring.PrimaryKeyID()).Scan(&p.Total).Error; err != nil {
			return total, fmt.Errorf("%s(%s.%s): %w", call, table, column, err)
		}
		progress(p)
		for {
			n, err := run(ctx, sc, r.Batch)
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
func (k *Rotator) notUnderPrimary(tx *gorm.DB, table, column string, batch int, lock string) ([]sealedRow, error) {
	var rows []sealedRow
	err := tx.Raw(fmt.Sprintf(`SELECT id, %[2]s_key_id AS key_id, %[2]s AS data FROM %[1]s
WHERE %[2]s IS NOT NULL AND %[2]s_key_id <> ? ORDER BY id LIMIT ? %[3]s`, table, column, lock), k.keyring.PrimaryKeyID(), batch).Scan(&rows).Error
	return rows, err
}

func (k *Rotator) rewrapBatch(ctx context.Context, sc postgres.SealedColumn, batch int) (int, error) {
	table, column := sc.Table, sc.Column
	rows, err := k.notUnderPrimary(k.db.Gorm.WithContext(ctx), table, column, batch, "")
	if err != nil {
		return 0, err
	}
	rewrapped := 0
	for _, r := range rows {
		sealed, _, err := k.keyring.Rewrap(secrets.Sealed{KeyID: r.KeyID, Data: r.Data}, sc.AAD(r.ID))
		if err != nil {
			return rewrapped, fmt.Errorf("row %s: %w", r.ID, err)
		}
		// Only if the row still holds what was read: a value written meanwhile wins.
		res := k.db.Gorm.WithContext(ctx).Exec(fmt.Sprintf(`UPDATE %[1]s SET %[2]s = ?, %[2]s_key_id = ?
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
func (k *Rotator) reencryptBatch(ctx context.Context, sc postgres.SealedColumn, batch int) (int, error) {
	table, column := sc.Table, sc.Column
	done := 0
	err := k.db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		rows, err := k.notUnderPrimary(tx, table, column, batch, "FOR UPDATE")
		if err != nil {
			return err
		}
		for _, r := range rows {
			where := sc.AAD(r.ID)
			plain, err := k.keyring.Open(secrets.Sealed{KeyID: r.KeyID, Data: r.Data}, where)
			if err != nil {
				return fmt.Errorf("row %s: %w", r.ID, err)
			}
			sealed, err := k.keyring.Seal(plain, where)
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
