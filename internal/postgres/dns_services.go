package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// dnsServiceRow is a naming policy with its zone's name.
type dnsServiceRow struct {
	ID                    string
	Name                  string
	ZoneID                string
	ZoneName              string `gorm:"->"`
	Subdomain             string
	NameTemplate          string
	WriterOrgs            []string              `gorm:"serializer:json"`
	WriterServiceAccounts []string              `gorm:"serializer:json"`
	RecordTypes           []fleet.DNSRecordType `gorm:"serializer:json"`
	MinTTL                int                   `gorm:"column:min_ttl"`
	MaxTTL                int                   `gorm:"column:max_ttl"`
	DefaultTTL            int                   `gorm:"column:default_ttl"`
	Generation            int64
	Records               int `gorm:"->"`
	CreatedAt             time.Time
	UpdatedAt             time.Time
}

func (r dnsServiceRow) toService() fleet.DNSService {
	return fleet.DNSService{ID: r.ID, Name: r.Name, ZoneID: r.ZoneID, ZoneName: r.ZoneName, Subdomain: r.Subdomain,
		NameTemplate: r.NameTemplate, WriterOrgs: nonNil(r.WriterOrgs), WriterServiceAccounts: nonNil(r.WriterServiceAccounts),
		RecordTypes: r.RecordTypes, MinTTL: r.MinTTL, MaxTTL: r.MaxTTL, DefaultTTL: r.DefaultTTL, Generation: r.Generation,
		Records: r.Records, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// dnsServices selects live services with their zone's name; counted adds
// their live records' count, which the admin reads show and the records'
// own path does not need, summed from the counters migration 202612021600
// keeps (a few rows a service, whatever the number of records).
func dnsServices(db *gorm.DB, counted bool) *gorm.DB {
	sel := "s.*, z.name AS zone_name"
	if counted {
		sel += ", (SELECT coalesce(sum(c.live), 0) FROM dns_service_record_counts c WHERE c.service_id = s.id) AS records"
	}
	return db.Table("dns_services AS s").Joins("JOIN dns_zones z ON z.id = s.zone_id").Select(sel).Where("s.deleted_at IS NULL")
}

var dnsServiceList = listSpec{
	search: SearchSchema{
		"id": {Column: "s.id", Type: FieldText}, "name": {Column: "s.name", Type: FieldText},
		"zone_id": {Column: "s.zone_id", Type: FieldText}, "zone_name": {Column: "z.name", Type: FieldText},
		"subdomain": {Column: "s.subdomain", Type: FieldText}, "created_by": {Column: "s.created_by", Type: FieldText},
		"created_at": {Column: "s.created_at", Type: FieldTimestamp}, "updated_at": {Column: "s.updated_at", Type: FieldTimestamp},
	},
	orderBy:      map[string]string{"name": "s.name", "zone_name": "z.name", "created_at": "s.created_at", "updated_at": "s.updated_at"},
	tiebreak:     "s.id",
	defaultOrder: "s.created_at",
}

// CreateDNSService onboards a naming policy in a live zone. Its name is
// unique and its subtree overlaps no other live service's, in any zone:
// checked under dnsNamesLockKey, so two concurrent creates cannot both pass.
func (s *DNSStore) CreateDNSService(ctx context.Context, caller fleet.Identity, create fleet.DNSServiceCreate) (fleet.DNSService, error) {
	create = create.Defaulted()
	if err := create.Validate(); err != nil {
		return fleet.DNSService{}, err
	}
	id := newID()
	err := s.transact(ctx, func(tx *gorm.DB) error {
		if err := lockDNSNames(tx); err != nil {
			return err
		}
		// Shared with other creates, exclusive of the zone's deletion.
		zone, err := lockDNSZone(tx, create.ZoneID, "KEY SHARE")
		if err != nil {
			return err
		}
		subtree := create.Subdomain + "." + zone.Name
		if !fleet.ValidDNSName(subtree) {
			return fleet.Errorf(fleet.CodeValidation, "subdomain makes a name longer than DNS allows in the zone")
		}
		var others []struct{ Name, Subtree string }
		if err := tx.Raw(`SELECT s.name, s.subdomain || '.' || z.name AS subtree FROM dns_services s JOIN dns_zones z ON z.id = s.zone_id
WHERE s.deleted_at IS NULL`).Scan(&others).Error; err != nil {
			return err
		}
		for _, o := range others {
			if o.Name == create.Name {
				return fleet.Errorf(fleet.CodeNameTaken, "name: a DNS service of this name is onboarded")
			}
			if fleet.DNSSubtreesOverlap(subtree, o.Subtree) {
				return fleet.Errorf(fleet.CodeNameTaken, "subdomain: the service's subtree overlaps another service's")
			}
		}
		err = tx.Exec(`INSERT INTO dns_services (id, name, zone_id, subdomain, name_template, writer_orgs, writer_service_accounts,
	record_types, min_ttl, max_ttl, default_ttl, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, create.Name, create.ZoneID, create.Subdomain, create.NameTemplate, jsonText(nonNil(create.WriterOrgs)),
			jsonText(nonNil(create.WriterServiceAccounts)), jsonText(create.RecordTypes), create.MinTTL, create.MaxTTL, create.DefaultTTL,
			caller.Username).Error
		if c, ok := uniqueViolation(err); ok && c == "dns_services_name" {
			return fleet.Errorf(fleet.CodeNameTaken, "name: a DNS service of this name is onboarded")
		}
		return err
	})
	if err != nil {
		return fleet.DNSService{}, fmt.Errorf("CreateDNSService(%s): %w", create.Name, err)
	}
	return s.FindDNSService(ctx, id)
}

// ListDNSServices returns a page of the live naming policies.
func (s *DNSStore) ListDNSServices(ctx context.Context, q fleet.ListQuery) ([]fleet.DNSService, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	rows, total, err := list[dnsServiceRow](dnsServices(s.db.Gorm.WithContext(ctx), true), dnsServiceList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListDNSServices(): %w", err)
	}
	out := make([]fleet.DNSService, len(rows))
	for i, r := range rows {
		out[i] = r.toService()
	}
	return out, total, nil
}

// FindDNSService returns a live naming policy with its records' count.
func (s *DNSStore) FindDNSService(ctx context.Context, id string) (fleet.DNSService, error) {
	return s.findDNSService(ctx, "FindDNSService", "s.id = ?", id, true)
}

// FindDNSServiceByName returns a live naming policy, for the records' API
// (every request of which reads it): its Records are not counted.
func (s *DNSStore) FindDNSServiceByName(ctx context.Context, name string) (fleet.DNSService, error) {
	return s.findDNSService(ctx, "FindDNSServiceByName", "s.name = ?", name, false)
}

func (s *DNSStore) findDNSService(ctx context.Context, call, where, value string, counted bool) (fleet.DNSService, error) {
	var row dnsServiceRow
	err := dnsServices(s.db.Gorm.WithContext(ctx), counted).Where(where, value).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.DNSService{}, notFound("DNS service", value)
	}
	if err != nil {
		return fleet.DNSService{}, fmt.Errorf("%s(%s): %w", call, value, err)
	}
	return row.toService(), nil
}

// lockDNSService locks a live service in tx with strength (UPDATE against
// new records, whose creates take KEY SHARE), with its zone's name.
func lockDNSService(tx *gorm.DB, id, strength string) (dnsServiceRow, error) {
	return lockDNSServiceWhere(tx, "s.id", id, strength)
}

// lockDNSServiceByName is lockDNSService by the service's name.
func lockDNSServiceByName(tx *gorm.DB, name, strength string) (dnsServiceRow, error) {
	return lockDNSServiceWhere(tx, "s.name", name, strength)
}

// lockDNSServiceWhere locks the live service whose column (a trusted
// column of dns_services s) is value.
func lockDNSServiceWhere(tx *gorm.DB, column, value, strength string) (dnsServiceRow, error) {
	var row dnsServiceRow
	err := tx.Raw(`SELECT s.*, z.name AS zone_name FROM dns_services s JOIN dns_zones z ON z.id = s.zone_id
WHERE `+column+` = ? AND s.deleted_at IS NULL FOR `+strength+` OF s`, value).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("DNS service", value)
	}
	return row, err
}

// UpdateDNSService changes a policy's writers, types or TTLs under
// If-Match; existing records keep theirs.
func (s *DNSStore) UpdateDNSService(ctx context.Context, id string, match *int64, update fleet.DNSServiceUpdate) (fleet.DNSService, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := lockDNSService(tx, id, "NO KEY UPDATE")
		if err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		next, err := update.Apply(row.toService())
		if err != nil {
			return err
		}
		return tx.Table("dns_services").Where("id = ?", id).Updates(map[string]any{
			"writer_orgs": jsonText(nonNil(next.WriterOrgs)), "writer_service_accounts": jsonText(nonNil(next.WriterServiceAccounts)),
			"record_types": jsonText(next.RecordTypes), "min_ttl": next.MinTTL, "max_ttl": next.MaxTTL, "default_ttl": next.DefaultTTL,
			"generation": gorm.Expr("generation + 1"), "updated_at": gorm.Expr("now()"),
		}).Error
	})
	if err != nil {
		return fleet.DNSService{}, fmt.Errorf("UpdateDNSService(%s): %w", id, err)
	}
	return s.FindDNSService(ctx, id)
}

// DeleteDNSService deletes a policy without live records under If-Match.
func (s *DNSStore) DeleteDNSService(ctx context.Context, id string, match *int64) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := lockDNSService(tx, id, "UPDATE")
		if err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		var held bool
		if err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM dns_records WHERE service_id = ? AND deleted_at IS NULL)`, id).Scan(&held).Error; err != nil {
			return err
		}
		if held {
			return fleet.Errorf(fleet.CodeConflict, "the DNS service holds live records; delete them first")
		}
		return tx.Exec(`UPDATE dns_services SET deleted_at = now(), updated_at = now(), generation = generation + 1 WHERE id = ?`, id).Error
	})
	if err != nil {
		return fmt.Errorf("DeleteDNSService(%s): %w", id, err)
	}
	return nil
}
