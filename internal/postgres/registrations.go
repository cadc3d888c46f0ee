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

// registrationRow is a row of registrations, with its hub's name and place.
type registrationRow struct {
	ID                  string
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
	DeletedAt           *time.Time
	OrgID               string
	Owner               string
	Name                string
	DisplayName         string
	Labels              map[string]string `gorm:"serializer:json"`
	Zone                string
	Region              string
	Product             string
	Credentials         []byte
	CredentialsKeyID    *string
	HubID               *string
	DeliveredVia        string
	Conditions          fleet.Conditions `gorm:"serializer:json"`
	Phase               string
	Generation          int64
	ObservedGeneration  int64
	PublishedRevision   *int64
	PublishedGeneration *int64
	WithdrawnRevision   *int64
	NextAttemptAt       *time.Time
	Attempts            int
	ClaimedBy           *string
	ClaimedUntil        *time.Time
	LastError           string
	HubConditions       fleet.Conditions `gorm:"serializer:json"`
	ImportMaterial      []byte
	ImportMaterialKeyID *string
	// DeletionAgeSeconds is filled only by the queue's claim: how long ago,
	// by the database's clock, deregistration was asked for.
	DeletionAgeSeconds *float64 `gorm:"->"`
	HubName            *string  `gorm:"->"`
	HubZone            *string  `gorm:"->"`
	HubRegion          *string  `gorm:"->"`
}

func (registrationRow) TableName() string { return "registrations" }

func (r registrationRow) toRegistration() fleet.Registration {
	reg := fleet.Registration{
		ID: r.ID, OrgID: r.OrgID, Owner: r.Owner, Name: r.Name, DisplayName: r.DisplayName, Labels: r.Labels,
		Zone: r.Zone, Region: r.Region, Product: fleet.Product(r.Product), HasCredentials: len(r.Credentials) > 0,
		Conditions: mergeConditions(r.Conditions, r.HubConditions), Phase: fleet.Phase(r.Phase), Generation: r.Generation,
		ObservedGeneration: r.ObservedGeneration, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		DeletionRequestedAt: r.DeletionRequestedAt, DeletedAt: r.DeletedAt, DeliveredVia: fleet.DeliveryMode(r.DeliveredVia),
	}
	if r.HubID != nil {
		reg.Hub = &fleet.HubRef{ID: *r.HubID, Name: deref(r.HubName), Zone: deref(r.HubZone), Region: deref(r.HubRegion)}
	}
	if reg.Labels == nil {
		reg.Labels = map[string]string{}
	}
	return reg
}

// registrations is the query every registration read starts from.
func registrations(tx *gorm.DB) *gorm.DB {
	return tx.Table("registrations AS r").
		Select("r.*, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region").
		Joins("LEFT JOIN hubs h ON h.id = r.hub_id")
}

// findRegistration reads a live registration of org in a served zone. A
// caller without an org sees nothing: never leave the org out to mean "any".
func (s *Store) findRegistration(tx *gorm.DB, org, id string) (registrationRow, error) {
	var row registrationRow
	if org == "" {
		return row, notFound("cluster", id)
	}
	err := s.inServedZones(registrations(tx), "r.zone").Where("r.id = ? AND r.deleted_at IS NULL AND r.org_id = ?", id, org).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("cluster", id)
	}
	return row, err
}

// lockRegistration locks a live registration of org in a served zone for update.
func (s *Store) lockRegistration(tx *gorm.DB, org, id string) (registrationRow, error) {
	var row registrationRow
	zones, zoneArgs := s.servedZonesSQL("zone")
	err := tx.Raw(`SELECT * FROM registrations WHERE id = ? AND org_id = ? AND deleted_at IS NULL AND `+zones+` FOR UPDATE`,
		append([]any{id, org}, zoneArgs...)...).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("cluster", id)
	}
	return row, err
}

// CreateRegistration registers a cluster for caller.
func (s *Store) CreateRegistration(ctx context.Context, caller fleet.Identity, create fleet.RegistrationCreate, idempotencyKey string) (fleet.Registration, bool, error) {
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
	var id string
	created, hash := true, requestHash(create)
	err := s.transact(ctx, func(tx *gorm.DB) error {
		// One create at a time per org: the quota and the idempotency key hold.
		if err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended('registrations:' || ?, 0))`, caller.OrgID).Error; err != nil {
			return err
		}
		existing, err := s.replayIdempotent(tx, caller.OrgID, idempotencyKey, hash)
		if err != nil {
			return err
		}
		if err := s.authorizeCreate(ctx, tx, subject, create.Product, existing != ""); err != nil {
			return err
		}
		if existing != "" {
			id, created = existing, false
			return nil
		}
		id, err = s.insertRegistration(tx, caller, create)
		if err != nil {
			return err
		}
		if idempotencyKey != "" {
			if err := tx.Exec(`INSERT INTO idempotency_keys (org_id, key, request_hash, registration_id) VALUES (?, ?, ?, ?)`,
				caller.OrgID, idempotencyKey, hash, id).Error; err != nil {
				return err
			}
		}
		return notify(tx, ChannelRegistrations, id)
	})
	if err != nil {
		return fleet.Registration{}, false, fmt.Errorf("CreateRegistration(%s/%s): %w", caller.OrgID, create.Name, err)
	}
	// A replay answers the registration as it is now, deleted or not.
	var row registrationRow
	if err := registrations(s.db.Gorm.WithContext(ctx)).Where("r.id = ?", id).Take(&row).Error; err != nil {
		return fleet.Registration{}, false, fmt.Errorf("CreateRegistration(%s/%s): %w", caller.OrgID, create.Name, err)
	}
	return row.toRegistration(), created, nil
}

// authorizeCreate asks the Authorizer whether subject may register a cluster
// of product, with the org's live registrations counted under the org's
// advisory lock: no other create of the org runs until this one commits, so
// the quota holds. A replay creates nothing and counts no registration
// against the quota; the other rules still apply to it.
func (s *Store) authorizeCreate(ctx context.Context, tx *gorm.DB, subject fleet.Subject, product fleet.Product, replay bool) error {
	var live int64
	if !replay && subject.OrgID != "" {
		if err := tx.Raw(`SELECT count(*) FROM registrations WHERE org_id = ? AND deleted_at IS NULL`, subject.OrgID).Scan(&live).Error; err != nil {
			return err
		}
	}
	return s.authz.Authorize(ctx, fleet.AuthzRequest{Subject: subject, Action: fleet.ActionClustersCreate,
		Resource: fleet.AuthzResource{Kind: "cluster", OrgID: subject.OrgID}, Product: string(product), LiveRegistrations: int(live)})
}

// replayIdempotent returns the registration an earlier request with the same
// key created, "" when there is none. The key's request must be the same.
func (s *Store) replayIdempotent(tx *gorm.DB, org, key, hash string) (string, error) {
	if key == "" {
		return "", nil
	}
	var prior struct {
		RequestHash    string
		RegistrationID string
		Expired        bool
	}
	err := tx.Raw(`SELECT request_hash, registration_id, created_at < now() - make_interval(secs => ?) AS expired
		FROM idempotency_keys WHERE org_id = ? AND key = ?`, s.cfg.IdempotencyKeyTTL.Seconds(), org, key).Take(&prior).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return "", nil
	case err != nil:
		return "", err
	case prior.Expired:
		return "", tx.Exec(`DELETE FROM idempotency_keys WHERE org_id = ? AND key = ?`, org, key).Error
	case prior.RequestHash != hash:
		return "", fleet.Errorf(fleet.CodeIdempotencyKeyReused, "the Idempotency-Key was used with a different request")
	}
	return prior.RegistrationID, nil
}

func (s *Store) insertRegistration(tx *gorm.DB, caller fleet.Identity, create fleet.RegistrationCreate) (string, error) {
	now := s.clock.Now()
	conds := fleet.Conditions{}.
		MarkTrue(fleet.ConditionAccepted, fleet.ReasonValidated, "the registration passed validation, quota and access checks", 1, now).
		MarkUnknown(fleet.ConditionPlaced, fleet.ReasonNotPlaced, "waiting for placement", 1, now)
	row := registrationRow{
		ID: newID(), OrgID: caller.OrgID, Owner: caller.Username, Name: create.Name, DisplayName: create.DisplayName,
		Labels: create.Labels, Zone: create.Zone, Region: create.Region, Product: string(create.Product),
		Conditions: conds, Generation: 1, HubConditions: fleet.Conditions{},
	}
	row.Phase = factsOf(row).phase()
	if row.Labels == nil {
		row.Labels = map[string]string{}
	}
	if create.Credentials != nil {
		plain, err := json.Marshal(create.Credentials)
		if err != nil {
			return "", err
		}
		sealed, err := s.seal(plain, "registrations", "credentials", row.ID)
		if err != nil {
			return "", err
		}
		row.Credentials, row.CredentialsKeyID = sealed.Data, &sealed.KeyID
	}
	if err := tx.Omit("created_at", "updated_at", "hub_name", "hub_zone", "hub_region").Create(&row).Error; err != nil {
		if c, ok := uniqueViolation(err); ok && c == "registrations_org_name_live" {
			return "", fleet.Errorf(fleet.CodeNameTaken, "a cluster of this name is already registered in this organisation")
		}
		return "", err
	}
	// Due at once, by the database's clock like every queue time.
	return row.ID, tx.Exec(`UPDATE registrations SET next_attempt_at = now() WHERE id = ?`, row.ID).Error
}

// requestHash fingerprints a create request for its Idempotency-Key.
func requestHash(create fleet.RegistrationCreate) string {
	b, _ := json.Marshal(create) // a struct of strings and maps always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FindRegistration returns a live registration of org.
func (s *Store) FindRegistration(ctx context.Context, org, id string) (fleet.Registration, error) {
	row, err := s.findRegistration(s.db.Gorm.WithContext(ctx), org, id)
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("FindRegistration(%s/%s): %w", org, id, err)
	}
	return row.toRegistration(), nil
}

// UpdateRegistration changes labels or display name under If-Match.
func (s *Store) UpdateRegistration(ctx context.Context, org, id string, ifMatch *int64, update fleet.RegistrationUpdate) (fleet.Registration, error) {
	if err := update.Validate(); err != nil {
		return fleet.Registration{}, err
	}
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockRegistration(tx, org, id)
		if err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, row.Generation); err != nil {
			return err
		}
		if row.DeletionRequestedAt != nil {
			return fleet.Errorf(fleet.CodeConflict, "cluster %s is being deregistered", id)
		}
		labels, display := row.Labels, row.DisplayName
		if update.Labels != nil {
			labels = derefMap(update.Labels)
		}
		if update.DisplayName != nil {
			display = *update.DisplayName
		}
		err = tx.Exec(`UPDATE registrations SET labels = ?, display_name = ?, generation = generation + 1,
			updated_at = now(), next_attempt_at = now(), attempts = 0 WHERE id = ?`, jsonText(labels), display, id).Error
		if err != nil {
			return err
		}
		return notify(tx, ChannelRegistrations, id)
	})
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("UpdateRegistration(%s/%s): %w", org, id, err)
	}
	return s.FindRegistration(ctx, org, id)
}

// RequestRegistrationDeletion marks a registration for deregistration; the
// deleting_mgr takes it from there. Repeating it changes nothing.
// The answer is read inside the transaction: deleting_mgr may finish an
// unplaced registration the moment the transaction commits.
func (s *Store) RequestRegistrationDeletion(ctx context.Context, org, id string) (fleet.Registration, error) {
	var answer registrationRow
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockRegistration(tx, org, id)
		if err == nil && row.DeletionRequestedAt == nil {
			facts := factsOf(row)
			facts.deletionRequested = true
			err = writeFacts(tx, id, facts, map[string]any{"updated_at": gorm.Expr("now()"), "next_attempt_at": gorm.Expr("now()"), "attempts": 0})
			if err == nil {
				err = notify(tx, ChannelRegistrations, id)
			}
		}
		if err != nil {
			return err
		}
		answer, err = s.findRegistration(tx, org, id)
		return err
	})
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("RequestRegistrationDeletion(%s/%s): %w", org, id, err)
	}
	return answer.toRegistration(), nil
}

// jsonText renders a value for a jsonb parameter.
func jsonText(v any) string {
	b, _ := json.Marshal(v) // maps of strings and condition slices always marshal
	return string(b)
}
