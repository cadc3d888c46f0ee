package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// resourceRow is a live row of resources with its hub.
type resourceRow struct {
	ID              string
	HubID           string
	Zone            string
	APIGroup        string
	Version         string
	Kind            string
	Namespace       string
	Name            string
	ClusterName     string
	UID             string
	ResourceVersion string
	Generation      int64
	Labels          map[string]string `gorm:"serializer:json"`
	Body            map[string]any    `gorm:"serializer:json"`
	ContentHash     string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	HubName         string
	HubZone         string
	HubRegion       string
}

func (r resourceRow) toResource() fleet.Resource {
	return fleet.Resource{
		ID: r.ID, Hub: fleet.HubRef{ID: r.HubID, Name: r.HubName, Zone: r.HubZone, Region: r.HubRegion}, Zone: r.Zone,
		Group: r.APIGroup, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, ClusterName: r.ClusterName,
		UID: r.UID, ResourceVersion: r.ResourceVersion, Generation: r.Generation, Labels: r.Labels, Body: r.Body,
		ContentHash: r.ContentHash, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// resourceSearch is what every kind may be searched by; a kind adds its
// registry Fields, read from body.
var resourceSearch = SearchSchema{
	"id": {Column: "r.id", Type: FieldText}, "name": {Column: "r.name", Type: FieldText},
	"namespace": {Column: "r.namespace", Type: FieldText}, "cluster_name": {Column: "r.cluster_name", Type: FieldText},
	"hub_id": {Column: "r.hub_id", Type: FieldText}, "hub_name": {Column: "h.name", Type: FieldText},
	"zone": {Column: "r.zone", Type: FieldText}, "uid": {Column: "r.uid", Type: FieldText},
	"labels":     {Column: "r.labels", Type: FieldLabels},
	"created_at": {Column: "r.created_at", Type: FieldTimestamp}, "updated_at": {Column: "r.updated_at", Type: FieldTimestamp},
}

// resourceListSpec returns the list spec of kind: the common fields and the
// kind's own, each a trusted path of the registry into body.
func resourceListSpec(kind fleet.ResourceKind) listSpec {
	search := maps.Clone(resourceSearch)
	for _, f := range kind.Fields {
		search[f.Name] = SearchField{Column: "(r.body #>> '{" + strings.Join(f.Path, ",") + "}')", Type: FieldText}
	}
	return listSpec{
		search: search,
		orderBy: map[string]string{
			"name": "r.name", "namespace": "r.namespace", "hub_name": "h.name", "created_at": "r.created_at", "updated_at": "r.updated_at",
		},
		tiebreak:     "r.id",
		defaultOrder: "r.created_at",
	}
}

// ListResources returns a page of one kind's live objects of live hubs.
func (s *InventoryStore) ListResources(ctx context.Context, q fleet.ResourceQuery) ([]fleet.Resource, int, error) {
	page, size, err := s.pageBounds(q.ListQuery)
	if err != nil {
		return nil, 0, err
	}
	query := s.db.Gorm.WithContext(ctx).Table("resources AS r").
		Select(`r.*, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region`).
		Joins("JOIN hubs h ON h.id = r.hub_id").
		Where("r.api_group = ? AND r.kind = ? AND r.deleted_at IS NULL AND h.deleted_at IS NULL", q.Kind.Group, q.Kind.Kind)
	query = s.inServedZones(query, "r.zone")
	if q.HubID != "" {
		query = query.Where("r.hub_id = ?", q.HubID)
	}
	if q.Namespace != "" {
		query = query.Where("r.namespace = ?", q.Namespace)
	}
	rows, total, err := list[resourceRow](query, resourceListSpec(q.Kind), q.ListQuery, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListResources(%s): %w", q.Kind.Kind, err)
	}
	out := make([]fleet.Resource, len(rows))
	for i, r := range rows {
		out[i] = r.toResource()
	}
	return out, total, nil
}

// FindResource returns one live object of a live hub in a served zone, as
// ListResources shows it. Errors: CodeNotFound.
func (s *InventoryStore) FindResource(ctx context.Context, id string) (fleet.Resource, error) {
	var row resourceRow
	query := s.db.Gorm.WithContext(ctx).Table("resources AS r").
		Select(`r.*, h.name AS hub_name, h.zone AS hub_zone, h.region AS hub_region`).
		Joins("JOIN hubs h ON h.id = r.hub_id").
		Where("r.id = ? AND r.deleted_at IS NULL AND h.deleted_at IS NULL", id)
	err := s.inServedZones(query, "r.zone").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.Resource{}, notFound("resource", id)
	}
	if err != nil {
		return fleet.Resource{}, fmt.Errorf("FindResource(%s): %w", id, err)
	}
	return row.toResource(), nil
}
