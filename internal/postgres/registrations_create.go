package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// CreateRegistration registers a cluster for caller. Creates of one
// organisation run side by side unless the Authorizer's decision can depend
// on the organisation's live registrations (a quota): then they run one at a
// time, so that the count each is decided on is exact. Two creates with one
// Idempotency-Key that meet make one registration either way: the second
// conflicts with the first's name or key when it inserts, and answers the
// first's as a replay (createConflict).
func (s *RegistrationStore) CreateRegistration(ctx context.Context, caller fleet.Identity, create fleet.RegistrationCreate, idempotencyKey string) (fleet.Registration, bool, error) {
	if create.Zone == "" {
		create.Zone = s.cfg.DefaultZone
	}
	if create.Zone == "" {
		return fleet.Registration{}, false, fleet.Errorf(fleet.CodeValidation, "zone is required")
	}
	if err := create.Validate(); err != nil {
		return fleet.Registration{}, false, err
	}
	// Before the caller's checks: the deployment that serves the zone decides them.
	if err := s.cfg.Zones.Check("cluster", create.Zone); err != nil {
		return fleet.Registration{}, false, err
	}
	subject := fleet.SubjectFromContext(ctx, caller)
	hash := requestHash(create)
	row, replay, err := s.insertOrReplay(ctx, caller, subject, create, idempotencyKey, hash)
	if err != nil && idempotencyKey != "" && createConflict(err) {
		replay, err = s.replayAfterConflict(ctx, subject, create.Product, idempotencyKey, hash, err)
	}
	if err != nil {
		return fleet.Registration{}, false, fmt.Errorf("CreateRegistration(%s/%s): %w", caller.OrgID, create.Name, err)
	}
	if replay == "" {
		s.wake(ChannelRegistrations)
		return row.toRegistration(), true, nil
	}
	// A replay answers the registration as it is now, deleted or not.
	var now registrationRow
	if err := registrations(s.db.Gorm.WithContext(ctx)).Where("r.id = ?", replay).Take(&now).Error; err != nil {
		return fleet.Registration{}, false, fmt.Errorf("CreateRegistration(%s/%s): %w", caller.OrgID, create.Name, err)
	}
	return now.toRegistration(), false, nil
}

// insertOrReplay inserts the registration and its idempotency key and
// returns the row written, or the id of the registration an earlier request
// with the same key created. A counted create runs in a transaction under
// the organisation's lock; an uncounted one is a statement or two
// (insertUncounted).
func (s *RegistrationStore) insertOrReplay(ctx context.Context, caller fleet.Identity, subject fleet.Subject, create fleet.RegistrationCreate, key, hash string) (row registrationRow, replay string, err error) {
	count := subject.OrgID != "" && s.countsLive()
	if !count {
		if row, replay, done, err := s.insertUncounted(ctx, caller, subject, create, key, hash); done {
			return row, replay, err
		}
	}
	err = s.transact(ctx, func(tx *gorm.DB) error {
		if count {
			// One counted create at a time per org: the quota holds.
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended('registrations:' || ?, 0))`, caller.OrgID).Error; err != nil {
				return err
			}
		}
		existing, err := s.replayIdempotent(tx, caller.OrgID, key, hash)
		if err != nil {
			return err
		}
		// A replay creates nothing and counts no registration against the
		// quota; the other rules still apply to it.
		// The count is a statement of its own after the lock's: its snapshot
		// then holds the commit of the create that held the lock before.
		var live int64
		if count && existing == "" {
			if err := tx.Raw(`SELECT coalesce(sum(live), 0) FROM registration_counts WHERE org_id = ?`, caller.OrgID).Scan(&live).Error; err != nil {
				return err
			}
		}
		if err := s.authorizeCreate(ctx, subject, create.Product, live); err != nil {
			return err
		}
		if existing != "" {
			replay = existing
			return nil
		}
		row, err = s.insertRegistration(tx, caller, create, key, hash)
		return err
	})
	return row, replay, err
}

// insertUncounted is a create whose decision does not depend on the count:
// a look-up of the key, if any, then one statement that inserts the
// registration and its key, which commits both or neither, with no
// transaction to open and commit around them. done is false when the key
// has expired: its deletion and replacement are left to the transaction.
func (s *RegistrationStore) insertUncounted(ctx context.Context, caller fleet.Identity, subject fleet.Subject, create fleet.RegistrationCreate, key, hash string) (row registrationRow, replay string, done bool, err error) {
	db := s.db.Gorm.WithContext(ctx)
	if key != "" {
		prior, found, err := s.findIdempotencyKey(db, caller.OrgID, key)
		switch {
		case err != nil:
			return row, "", true, err
		case found && prior.Expired:
			return row, "", false, nil
		case found && prior.RequestHash != hash:
			return row, "", true, errKeyReused()
		case found:
			replay = prior.RegistrationID
		}
	}
	if err := s.authorizeCreate(ctx, subject, create.Product, 0); err != nil || replay != "" {
		return row, replay, true, err
	}
	row, err = s.insertRegistration(db, caller, create, key, hash)
	return row, "", true, err
}

// liveCountReader is the side of a fleet.Authorizer (authz.Authorizer's)
// that tells whether a decision can depend on the request's
// LiveRegistrations.
type liveCountReader interface {
	ReadsLiveRegistrations() bool
}

// countsLive tells whether a create must count its organisation's live
// registrations, under the organisation's lock: when the Authorizer may
// decide on the count, or cannot tell.
func (s *RegistrationStore) countsLive() bool {
	r, ok := s.authz.(liveCountReader)
	return !ok || r.ReadsLiveRegistrations()
}

// authorizeCreate asks the Authorizer whether subject may register a cluster
// of product, with the org's live registrations (0 when not counted).
func (s *RegistrationStore) authorizeCreate(ctx context.Context, subject fleet.Subject, product fleet.Product, live int64) error {
	return s.authz.Authorize(ctx, fleet.AuthzRequest{Subject: subject, Action: fleet.ActionClustersCreate,
		Resource: fleet.AuthzResource{Kind: "cluster", OrgID: subject.OrgID}, Product: string(product), LiveRegistrations: int(live)})
}

// createConflict tells whether a create's transaction failed on a live
// registration of the same name or on an idempotency key another request
// holds: what a create with the same key that committed first leaves.
func createConflict(err error) bool {
	c, ok := uniqueViolation(err)
	return fleet.ErrorCodeOf(err) == fleet.CodeNameTaken || (ok && c == "idempotency_keys_pkey")
}

// replayAfterConflict looks key up again after a create failed on conflict
// and its transaction rolled back. Without the per-org lock, two creates with
// the same key may both find it unused; the first to commit wins, the other
// fails on its name (or, with another request, on the key) and answers here:
// the winner's registration when the key names it with the same request,
// CodeIdempotencyKeyReused for another request, conflict itself when the key
// is not in use. A replay is authorized as every replay is.
func (s *RegistrationStore) replayAfterConflict(ctx context.Context, subject fleet.Subject, product fleet.Product, key, hash string, conflict error) (string, error) {
	prior, found, err := s.findIdempotencyKey(s.db.Gorm.WithContext(ctx), subject.OrgID, key)
	switch {
	case err != nil:
		return "", err
	case !found || prior.Expired:
		if fleet.ErrorCodeOf(conflict) == fleet.CodeNameTaken {
			return "", conflict
		}
		return "", &fleet.Error{Code: fleet.CodeConflict, Message: "a concurrent request used the Idempotency-Key; try again", Err: conflict}
	case prior.RequestHash != hash:
		return "", errKeyReused()
	}
	if err := s.authorizeCreate(ctx, subject, product, 0); err != nil {
		return "", err
	}
	return prior.RegistrationID, nil
}

// idempotencyKey is a row of idempotency_keys, with whether it outlived
// --idempotency-key-ttl.
type idempotencyKey struct {
	RequestHash    string
	RegistrationID string
	Expired        bool
}

// findIdempotencyKey reads org's key.
func (s *RegistrationStore) findIdempotencyKey(tx *gorm.DB, org, key string) (idempotencyKey, bool, error) {
	var prior idempotencyKey
	err := tx.Raw(`SELECT request_hash, registration_id, created_at < now() - make_interval(secs => ?) AS expired
		FROM idempotency_keys WHERE org_id = ? AND key = ?`, s.cfg.IdempotencyKeyTTL.Seconds(), org, key).Take(&prior).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return prior, false, nil
	}
	return prior, err == nil, err
}

// replayIdempotent returns the registration an earlier request with the same
// key created, "" when there is none; an expired key is deleted. The key's
// request must be the same.
func (s *RegistrationStore) replayIdempotent(tx *gorm.DB, org, key, hash string) (string, error) {
	if key == "" {
		return "", nil
	}
	prior, found, err := s.findIdempotencyKey(tx, org, key)
	switch {
	case err != nil || !found:
		return "", err
	case prior.Expired:
		return "", tx.Exec(`DELETE FROM idempotency_keys WHERE org_id = ? AND key = ?`, org, key).Error
	case prior.RequestHash != hash:
		return "", errKeyReused()
	}
	return prior.RegistrationID, nil
}

// errKeyReused is the refusal of a key used with another request.
func errKeyReused() error {
	return fleet.Errorf(fleet.CodeIdempotencyKeyReused, "the Idempotency-Key was used with a different request")
}

// insertRegistrationSQL writes a new registration, due at once by the
// database's clock like every queue time, and returns the columns the
// database set. The columns it leaves out take their defaults.
const insertRegistrationSQL = `INSERT INTO registrations (id, org_id, owner, name, display_name, labels, zone, region,
	product, credentials, credentials_key_id, conditions, phase, generation, hub_conditions, next_attempt_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())
RETURNING id, created_at, updated_at, next_attempt_at`

// insertRegistrationKeySQL is insertRegistrationSQL with the registration's
// idempotency key, in one statement: both rows or neither.
const insertRegistrationKeySQL = `WITH r AS (` + insertRegistrationSQL + `),
k AS (INSERT INTO idempotency_keys (org_id, key, request_hash, registration_id) SELECT ?, ?, ?, id FROM r)
SELECT id, created_at, updated_at, next_attempt_at FROM r`

// insertRegistration writes caller's new registration, and its idempotency
// key when there is one, and returns its row as written, the answer to its
// create.
func (s *RegistrationStore) insertRegistration(tx *gorm.DB, caller fleet.Identity, create fleet.RegistrationCreate, key, hash string) (registrationRow, error) {
	row, err := s.newRegistrationRow(s.newRegistrationTemplate(caller), create)
	if err != nil {
		return row, err
	}
	var set struct {
		ID                   string
		CreatedAt, UpdatedAt time.Time
		NextAttemptAt        *time.Time
	}
	sql, args := insertRegistrationSQL, []any{row.ID, row.OrgID, row.Owner, row.Name, row.DisplayName, jsonText(row.Labels), row.Zone, row.Region,
		row.Product, row.Credentials, row.CredentialsKeyID, jsonText(row.Conditions), row.Phase, row.Generation, jsonText(row.HubConditions)}
	if key != "" {
		sql, args = insertRegistrationKeySQL, append(args, caller.OrgID, key, hash)
	}
	err = tx.Raw(sql, args...).Scan(&set).Error
	if err == nil && set.ID != row.ID {
		err = fmt.Errorf("insertRegistration: the insert returned no row")
	}
	if c, ok := uniqueViolation(err); ok && c == "registrations_org_name_live" {
		return row, fleet.Errorf(fleet.CodeNameTaken, "a cluster of this name is already registered in this organisation")
	}
	row.CreatedAt, row.UpdatedAt, row.NextAttemptAt = set.CreatedAt, set.UpdatedAt, set.NextAttemptAt
	return row, err
}

// requestHash fingerprints a create request for its Idempotency-Key.
func requestHash(create fleet.RegistrationCreate) string {
	b, _ := json.Marshal(create) // a struct of strings and maps always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
