package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// blueprintRow is a live blueprint with its latest version's spec.
type blueprintRow struct {
	ID            string
	OrgID         string
	Name          string
	LatestVersion int
	CreatedBy     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Spec          json.RawMessage `gorm:"->"`
}

func (r blueprintRow) toBlueprint() (fleet.Blueprint, error) {
	b := fleet.Blueprint{ID: r.ID, OrgID: r.OrgID, Owner: r.CreatedBy, Name: r.Name, LatestVersion: r.LatestVersion,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	err := json.Unmarshal(r.Spec, &b.Latest)
	return b, err
}

// blueprints selects live blueprints with their latest version's spec.
func blueprints(db *gorm.DB) *gorm.DB {
	return db.Table("blueprints AS b").Select("b.*, v.spec").
		Joins("JOIN blueprint_versions v ON v.blueprint_id = b.id AND v.version = b.latest_version").Where("b.deleted_at IS NULL")
}

var blueprintList = listSpec{
	search: SearchSchema{
		"id": {Column: "b.id", Type: FieldText}, "name": {Column: "b.name", Type: FieldText},
		"latest_version": {Column: "b.latest_version", Type: FieldInteger}, "created_by": {Column: "b.created_by", Type: FieldText},
		"created_at": {Column: "b.created_at", Type: FieldTimestamp}, "updated_at": {Column: "b.updated_at", Type: FieldTimestamp},
	},
	orderBy:      map[string]string{"name": "b.name", "created_at": "b.created_at", "updated_at": "b.updated_at"},
	tiebreak:     "b.id",
	defaultOrder: "b.created_at",
}

// CreateBlueprint stores a blueprint and its version 1.
func (s *BlueprintStore) CreateBlueprint(ctx context.Context, caller fleet.Identity, name string, spec fleet.BlueprintSpec) (fleet.Blueprint, error) {
	if caller.OrgID == "" {
		return fleet.Blueprint{}, fleet.Errorf(fleet.CodeOrgNotAllowed, "the token carries no organisation")
	}
	if len(name) > 63 || !fleet.ValidDNSLabel(name) {
		return fleet.Blueprint{}, fleet.Errorf(fleet.CodeValidation, "name must be a DNS label")
	}
	if err := spec.Validate(); err != nil {
		return fleet.Blueprint{}, err
	}
	id := newID()
	err := s.transact(ctx, func(tx *gorm.DB) error {
		err := tx.Exec(`INSERT INTO blueprints (id, org_id, name, created_by) VALUES (?, ?, ?, ?)`, id, caller.OrgID, name, caller.Username).Error
		if c, ok := uniqueViolation(err); ok && c == "blueprints_org_name" {
			return fleet.Errorf(fleet.CodeNameTaken, "a blueprint of this name already exists in this organisation")
		}
		if err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO blueprint_versions (blueprint_id, version, spec, created_by) VALUES (?, 1, ?, ?)`,
			id, jsonText(spec), caller.Username).Error
	})
	if err != nil {
		return fleet.Blueprint{}, fmt.Errorf("CreateBlueprint(%s/%s): %w", caller.OrgID, name, err)
	}
	return s.FindBlueprint(ctx, caller.OrgID, id)
}

// ListBlueprints returns a page of the organisation's live blueprints.
func (s *BlueprintStore) ListBlueprints(ctx context.Context, org string, q fleet.ListQuery) ([]fleet.Blueprint, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	rows, total, err := list[blueprintRow](blueprints(s.db.Gorm.WithContext(ctx)).Where("b.org_id = ?", org), blueprintList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListBlueprints(%s): %w", org, err)
	}
	out := make([]fleet.Blueprint, len(rows))
	for i, r := range rows {
		if out[i], err = r.toBlueprint(); err != nil {
			return nil, 0, fmt.Errorf("ListBlueprints(%s): blueprint %s: %w", org, r.ID, err)
		}
	}
	return out, total, nil
}

// FindBlueprint returns one of the organisation's live blueprints.
func (s *BlueprintStore) FindBlueprint(ctx context.Context, org, id string) (fleet.Blueprint, error) {
	var row blueprintRow
	err := blueprints(s.db.Gorm.WithContext(ctx)).Where("b.org_id = ? AND b.id = ?", org, id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.Blueprint{}, notFound("blueprint", id)
	}
	if err != nil {
		return fleet.Blueprint{}, fmt.Errorf("FindBlueprint(%s/%s): %w", org, id, err)
	}
	return row.toBlueprint()
}

// CreateBlueprintVersion stores a blueprint's next version: changing a
// blueprint is creating a version; the versions before stay as they were.
func (s *BlueprintStore) CreateBlueprintVersion(ctx context.Context, permit fleet.Permit, caller fleet.Identity, id string, spec fleet.BlueprintSpec) (fleet.BlueprintVersion, error) {
	var version int
	err := s.transact(ctx, func(tx *gorm.DB) error {
		locked, err := s.lockBlueprint(tx, caller.OrgID, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, locked.authzResource(id, caller.OrgID)); err != nil {
			return err
		}
		if err := spec.Validate(); err != nil {
			return err
		}
		version = locked.LatestVersion + 1
		if err := tx.Exec(`UPDATE blueprints SET latest_version = ?, updated_at = now() WHERE id = ?`, version, id).Error; err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO blueprint_versions (blueprint_id, version, spec, created_by) VALUES (?, ?, ?, ?)`,
			id, version, jsonText(spec), caller.Username).Error
	})
	if err != nil {
		return fleet.BlueprintVersion{}, fmt.Errorf("CreateBlueprintVersion(%s/%s): %w", caller.OrgID, id, err)
	}
	return s.FindBlueprintVersion(ctx, caller.OrgID, id, version)
}

// blueprintVersionRow is one version with the live pools on it.
type blueprintVersionRow struct {
	BlueprintID string
	Version     int
	Spec        json.RawMessage
	Pools       int
	CreatedAt   time.Time
}

func blueprintVersions(db *gorm.DB, org, id string) *gorm.DB {
	return db.Table("blueprint_versions AS v").
		Select(`v.blueprint_id, v.version, v.spec, v.created_at, (SELECT count(*) FROM capacity_pools p
	WHERE p.blueprint_id = v.blueprint_id AND p.blueprint_version = v.version AND p.deleted_at IS NULL) AS pools`).
		Joins("JOIN blueprints b ON b.id = v.blueprint_id AND b.org_id = ? AND b.deleted_at IS NULL", org).
		Where("v.blueprint_id = ? AND v.deleted_at IS NULL", id)
}

func (r blueprintVersionRow) toVersion() (fleet.BlueprintVersion, error) {
	v := fleet.BlueprintVersion{BlueprintID: r.BlueprintID, Version: r.Version, Pools: r.Pools, CreatedAt: r.CreatedAt}
	err := json.Unmarshal(r.Spec, &v.Spec)
	return v, err
}

// FindBlueprintVersion returns one live version of one of the organisation's blueprints.
func (s *BlueprintStore) FindBlueprintVersion(ctx context.Context, org, id string, version int) (fleet.BlueprintVersion, error) {
	var row blueprintVersionRow
	err := blueprintVersions(s.db.Gorm.WithContext(ctx), org, id).Where("v.version = ?", version).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.BlueprintVersion{}, notFound("blueprint version", id)
	}
	if err != nil {
		return fleet.BlueprintVersion{}, fmt.Errorf("FindBlueprintVersion(%s/%s/%d): %w", org, id, version, err)
	}
	return row.toVersion()
}

var blueprintVersionList = listSpec{search: SearchSchema{"version": {Column: "v.version", Type: FieldInteger}, "created_at": {Column: "v.created_at", Type: FieldTimestamp}},
	orderBy: map[string]string{"version": "v.version", "created_at": "v.created_at"}, tiebreak: "v.version", defaultOrder: "v.version desc"}

// ListBlueprintVersions returns a page of a blueprint's live versions, newest first.
func (s *BlueprintStore) ListBlueprintVersions(ctx context.Context, org, id string, q fleet.ListQuery) ([]fleet.BlueprintVersion, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.FindBlueprint(ctx, org, id); err != nil {
		return nil, 0, err
	}
	rows, total, err := list[blueprintVersionRow](blueprintVersions(s.db.Gorm.WithContext(ctx), org, id), blueprintVersionList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListBlueprintVersions(%s/%s): %w", org, id, err)
	}
	out := make([]fleet.BlueprintVersion, len(rows))
	for i, r := range rows {
		if out[i], err = r.toVersion(); err != nil {
			return nil, 0, err
		}
	}
	return out, total, nil
}

// DeleteBlueprintVersion deletes a version no live pool uses; the latest
// version stays (delete the blueprint instead).
func (s *BlueprintStore) DeleteBlueprintVersion(ctx context.Context, permit fleet.Permit, org, id string, version int) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		locked, err := s.lockBlueprint(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, locked.authzResource(id, org)); err != nil {
			return err
		}
		if version == locked.LatestVersion {
			return fleet.Errorf(fleet.CodeConflict, "the latest version of a blueprint cannot be deleted; delete the blueprint")
		}
		if err := blueprintInUse(tx, id, &version); err != nil {
			return err
		}
		res := tx.Exec(`UPDATE blueprint_versions SET deleted_at = now() WHERE blueprint_id = ? AND version = ? AND deleted_at IS NULL`, id, version)
		if res.Error == nil && res.RowsAffected == 0 {
			return notFound("blueprint version", id)
		}
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("DeleteBlueprintVersion(%s/%s/%d): %w", org, id, version, err)
	}
	return nil
}

// DeleteBlueprint deletes a blueprint none of whose versions a live pool uses.
func (s *BlueprintStore) DeleteBlueprint(ctx context.Context, permit fleet.Permit, org, id string) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		locked, err := s.lockBlueprint(tx, org, id)
		if err != nil {
			return err
		}
		if err := permit(ctx, locked.authzResource(id, org)); err != nil {
			return err
		}
		if err := blueprintInUse(tx, id, nil); err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE blueprint_versions SET deleted_at = now() WHERE blueprint_id = ? AND deleted_at IS NULL`, id).Error; err != nil {
			return err
		}
		return tx.Exec(`UPDATE blueprints SET deleted_at = now(), updated_at = now() WHERE id = ?`, id).Error
	})
	if err != nil {
		return fmt.Errorf("DeleteBlueprint(%s/%s): %w", org, id, err)
	}
	return nil
}

// lockedBlueprint is what lockBlueprint reads of the row it locks.
type lockedBlueprint struct {
	LatestVersion int
	CreatedBy     string
}

// authzResource is the blueprint as the Authorizer sees it.
func (b lockedBlueprint) authzResource(id, org string) fleet.AuthzResource {
	return fleet.AuthzResource{Kind: "blueprint", ID: id, OrgID: org, CreatedBy: b.CreatedBy}
}

// lockBlueprint locks one of the organisation's live blueprints in tx, so a
// pool created or moved concurrently waits for a deletion (CreatePool and
// UpdatePool take the same lock), and a new version for another.
func (s *BlueprintStore) lockBlueprint(tx *gorm.DB, org, id string) (lockedBlueprint, error) {
	var b lockedBlueprint
	err := tx.Raw(`SELECT latest_version, created_by FROM blueprints WHERE id = ? AND org_id = ? AND deleted_at IS NULL FOR UPDATE`, id, org).
		Take(&b).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return b, notFound("blueprint", id)
	}
	return b, err
}

// blueprintInUse refuses when a live pool uses the blueprint (at version,
// when not nil).
func blueprintInUse(tx *gorm.DB, id string, version *int) error {
	q := tx.Table("capacity_pools").Where("blueprint_id = ? AND deleted_at IS NULL", id)
	if version != nil {
		q = q.Where("blueprint_version = ?", *version)
	}
	var n int64
	if err := q.Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return fleet.Errorf(fleet.CodeConflict, "%d capacity pools use it; move or delete them first", n)
	}
	return nil
}
