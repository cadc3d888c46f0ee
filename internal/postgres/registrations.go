package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
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
		Conditions: fleet.MergeHubReportedConditions(r.Conditions, r.HubConditions), Phase: fleet.Phase(r.Phase), Generation: r.Generation,
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
func (s *RegistrationStore) findRegistration(tx *gorm.DB, org, id string) (registrationRow, error) {
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
func (s *RegistrationStore) lockRegistration(tx *gorm.DB, org, id string) (registrationRow, error) {
	var row registrationRow
	zones, zoneArgs := s.servedZonesSQL("zone")
	err := tx.Raw(`SELECT * FROM registrations WHERE id = ? AND org_id = ? AND deleted_at IS NULL AND `+zones+` FOR UPDATE`,
		append([]any{id, org}, zoneArgs...)...).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("cluster", id)
	}
	return row, err
}

// FindRegistration returns a live registration of org.
func (s *RegistrationStore) FindRegistration(ctx context.Context, org, id string) (fleet.Registration, error) {
	row, err := s.findRegistration(s.db.Gorm.WithContext(ctx), org, id)
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("FindRegistration(%s/%s): %w", org, id, err)
	}
	return row.toRegistration(), nil
}

// UpdateRegistration changes labels or display name under If-Match.
func (s *RegistrationStore) UpdateRegistration(ctx context.Context, permit fleet.Permit, org, id string, ifMatch *int64, update fleet.RegistrationUpdate) (fleet.Registration, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockRegistration(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, row.authzResource()); err != nil {
			return err
		}
		if err := update.Validate(); err != nil {
			return err
		}
		if err := checkIfMatch(ifMatch, row.Generation); err != nil {
			return err
		}
		if row.DeletionRequestedAt != nil {
			return fleet.Errorf(fleet.CodeConflict, "cluster %s is being deregistered", id)
		}
		if err := refusePoolCluster(row); err != nil {
			return err
		}
		labels, display := row.Labels, row.DisplayName
		if update.Labels != nil {
			labels = derefMap(update.Labels)
		}
		if update.DisplayName != nil {
			display = *update.DisplayName
		}
		if err := tx.Exec(`UPDATE registrations SET labels = ?, display_name = ?, generation = generation + 1,
			updated_at = now(), next_attempt_at = now(), attempts = 0 WHERE id = ?`, jsonText(labels), display, id).Error; err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelRegistrations, id)
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
func (s *RegistrationStore) RequestRegistrationDeletion(ctx context.Context, permit fleet.Permit, org, id string) (fleet.Registration, error) {
	var answer registrationRow
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := s.lockRegistration(tx, org, id)
		if err == nil {
			err = permit(ctx, row.authzResource())
		}
		if err == nil && row.DeletionRequestedAt == nil {
			err = refusePoolCluster(row)
		}
		if err == nil && row.DeletionRequestedAt == nil {
			facts := factsOf(row)
			facts.deletionRequested = true
			err = writeFacts(tx, id, facts, map[string]any{"updated_at": gorm.Expr("now()"), "next_attempt_at": gorm.Expr("now()"), "attempts": 0})
			if err == nil {
				err = wakeAfterCommit(tx, ChannelRegistrations, id)
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

// authzResource is the registration as the Authorizer sees it.
func (r registrationRow) authzResource() fleet.AuthzResource {
	return fleet.AuthzResource{Kind: "cluster", ID: r.ID, OrgID: r.OrgID, CreatedBy: r.Owner}
}

// refusePoolCluster refuses a caller's change to a cluster a capacity pool
// made: the pool owns its labels and its life (ADR 0018). The pool's label
// is set by pool_mgr alone (callers may not set the prefix) and never
// changes, so the locked row says it.
func refusePoolCluster(row registrationRow) error {
	if pool := row.Labels[fleet.LabelPoolID]; pool != "" {
		return fleet.Errorf(fleet.CodeConflict, "the cluster belongs to capacity pool %s; change the pool instead", pool)
	}
	return nil
}

// jsonText renders a value for a jsonb parameter.
func jsonText(v any) string {
	b, _ := json.Marshal(v) // maps of strings and condition slices always marshal
	return string(b)
}

// FindImportMaterial returns the manifests that import org's registration.
func (s *RegistrationStore) FindImportMaterial(ctx context.Context, permit fleet.Permit, org, id string) (string, error) {
	row, err := s.findRegistration(s.db.Gorm.WithContext(ctx), org, id)
	if err == nil {
		err = permit(ctx, row.authzResource())
	}
	if err != nil {
		return "", fmt.Errorf("FindImportMaterial(%s/%s): %w", org, id, err)
	}
	if len(row.ImportMaterial) == 0 || row.ImportMaterialKeyID == nil {
		return "", fleet.Errorf(fleet.CodeNotFound, "the hub has not made the import material of cluster %s yet", id)
	}
	plain, err := s.keyring.Open(secrets.Sealed{KeyID: *row.ImportMaterialKeyID, Data: row.ImportMaterial}, aad("registrations", "import_material", row.ID))
	if err != nil {
		return "", fmt.Errorf("FindImportMaterial(%s/%s): %w", org, id, err)
	}
	return string(plain), nil
}
