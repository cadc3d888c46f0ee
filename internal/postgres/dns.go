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

// ChannelDNS wakes dns_mgr: a record of the zone named by the payload is due.
const ChannelDNS = "fleet_dns"

// dnsNamesLockKey is the advisory lock that serialises the onboarding of
// zones and services, whose names must not overlap any other's: two
// concurrent creates cannot both pass the check. Any constant works, as long
// as it never changes.
const dnsNamesLockKey = 7_031_960_121

// dnsZoneSettings are a zone's provider settings as the settings column
// holds them: never a secret.
type dnsZoneSettings struct {
	RFC2136 *fleet.RFC2136Settings `json:"rfc2136,omitempty"`
	Route53 *fleet.Route53Settings `json:"route53,omitempty"`
}

// dnsZoneRow is a zone with its live services' count.
type dnsZoneRow struct {
	ID               string
	Name             string
	Provider         string
	Settings         dnsZoneSettings `gorm:"serializer:json"`
	Nameservers      []string        `gorm:"serializer:json"`
	Credentials      []byte
	CredentialsKeyID *string
	Generation       int64
	CreatedAt        time.Time
	UpdatedAt        time.Time
	ClaimedBy        *string
	Attempts         int
	Services         int `gorm:"->"`
}

func (r dnsZoneRow) toZone() fleet.DNSZone {
	ns := r.Nameservers
	if ns == nil {
		ns = []string{}
	}
	return fleet.DNSZone{ID: r.ID, Name: r.Name, Provider: fleet.DNSProviderKind(r.Provider), RFC2136: r.Settings.RFC2136,
		Route53: r.Settings.Route53, Nameservers: ns, HasCredentials: len(r.Credentials) > 0, Generation: r.Generation,
		Services: r.Services, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// dnsZones selects live zones with their live services' count.
func dnsZones(db *gorm.DB) *gorm.DB {
	return db.Table("dns_zones AS z").Select(`z.*,
	(SELECT count(*) FROM dns_services s WHERE s.zone_id = z.id AND s.deleted_at IS NULL) AS services`).Where("z.deleted_at IS NULL")
}

var dnsZoneList = listSpec{
	search: SearchSchema{
		"id": {Column: "z.id", Type: FieldText}, "name": {Column: "z.name", Type: FieldText},
		"provider": {Column: "z.provider", Type: FieldText}, "created_by": {Column: "z.created_by", Type: FieldText},
		"created_at": {Column: "z.created_at", Type: FieldTimestamp}, "updated_at": {Column: "z.updated_at", Type: FieldTimestamp},
	},
	orderBy:      map[string]string{"name": "z.name", "provider": "z.provider", "created_at": "z.created_at", "updated_at": "z.updated_at"},
	tiebreak:     "z.id",
	defaultOrder: "z.created_at",
}

// lockDNSNames takes dnsNamesLockKey until tx ends.
func lockDNSNames(tx *gorm.DB) error {
	return tx.Exec("SELECT pg_advisory_xact_lock(?)", int64(dnsNamesLockKey)).Error
}

// CreateDNSZone onboards a zone, its credentials sealed to its row. A zone
// whose name is another live zone's, or holds one or is held by one, is
// refused: a name has one zone to be written to.
func (s *DNSStore) CreateDNSZone(ctx context.Context, caller fleet.Identity, create fleet.DNSZoneCreate) (fleet.DNSZone, error) {
	if err := create.Validate(); err != nil {
		return fleet.DNSZone{}, err
	}
	name := fleet.NormalizeDNSName(create.Name)
	id := newID()
	sealed, err := s.sealDNSCredentials(create.Credentials, id)
	if err != nil {
		return fleet.DNSZone{}, err
	}
	ns := create.Nameservers
	if ns == nil {
		ns = []string{}
	}
	err = s.transact(ctx, func(tx *gorm.DB) error {
		if err := lockDNSNames(tx); err != nil {
			return err
		}
		var clashes int64
		if err := tx.Raw(`SELECT count(*) FROM dns_zones WHERE deleted_at IS NULL
	AND (name = ? OR right(?, length(name) + 1) = '.' || name OR right(name, length(?) + 1) = '.' || ?)`, name, name, name, name).
			Scan(&clashes).Error; err != nil {
			return err
		}
		if clashes > 0 {
			return fleet.Errorf(fleet.CodeNameTaken, "name: a DNS zone of this name, or one that holds it or is held by it, is onboarded")
		}
		err := tx.Exec(`INSERT INTO dns_zones (id, name, provider, settings, nameservers, credentials, credentials_key_id, created_by)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, name, string(create.Provider), jsonText(dnsZoneSettings{RFC2136: create.RFC2136, Route53: create.Route53}),
			jsonText(ns), sealed.Data, nonEmpty(sealed.KeyID), caller.Username).Error
		if c, ok := uniqueViolation(err); ok && c == "dns_zones_name" {
			return fleet.Errorf(fleet.CodeNameTaken, "name: a DNS zone of this name is onboarded")
		}
		return err
	})
	if err != nil {
		return fleet.DNSZone{}, fmt.Errorf("CreateDNSZone(%s): %w", name, err)
	}
	return s.FindDNSZone(ctx, id)
}

// sealDNSCredentials seals a zone's credentials to its row; none seal to
// nothing (a Route53 zone on the deployment's own AWS credentials).
func (s *DNSStore) sealDNSCredentials(creds *fleet.DNSCredentials, id string) (secrets.Sealed, error) {
	if creds == nil {
		return secrets.Sealed{}, nil
	}
	plain, err := json.Marshal(creds)
	if err != nil {
		return secrets.Sealed{}, err
	}
	defer clear(plain)
	return s.seal(plain, "dns_zones", "credentials", id)
}

// openDNSCredentials opens a zone's sealed credentials (zero when none).
func (s *DNSStore) openDNSCredentials(id string, data []byte, keyID *string) (fleet.DNSCredentials, error) {
	var creds fleet.DNSCredentials
	if len(data) == 0 || keyID == nil {
		return creds, nil
	}
	plain, err := s.keyring.Open(secrets.Sealed{KeyID: *keyID, Data: data}, aad("dns_zones", "credentials", id))
	if err != nil {
		return creds, fmt.Errorf("DNS zone %s credentials: %w", id, err)
	}
	defer clear(plain)
	if err := json.Unmarshal(plain, &creds); err != nil {
		return creds, fmt.Errorf("DNS zone %s credentials: %w", id, err)
	}
	return creds, nil
}

// ListDNSZones returns a page of the live zones.
func (s *DNSStore) ListDNSZones(ctx context.Context, q fleet.ListQuery) ([]fleet.DNSZone, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	rows, total, err := list[dnsZoneRow](dnsZones(s.db.Gorm.WithContext(ctx)), dnsZoneList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListDNSZones(): %w", err)
	}
	out := make([]fleet.DNSZone, len(rows))
	for i, r := range rows {
		out[i] = r.toZone()
	}
	return out, total, nil
}

// FindDNSZone returns a live zone, without its credentials.
func (s *DNSStore) FindDNSZone(ctx context.Context, id string) (fleet.DNSZone, error) {
	var row dnsZoneRow
	err := dnsZones(s.db.Gorm.WithContext(ctx)).Where("z.id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fleet.DNSZone{}, notFound("DNS zone", id)
	}
	if err != nil {
		return fleet.DNSZone{}, fmt.Errorf("FindDNSZone(%s): %w", id, err)
	}
	return row.toZone(), nil
}

// lockDNSZone locks a live zone in tx (FOR UPDATE, or another lock strength).
func lockDNSZone(tx *gorm.DB, id, strength string) (dnsZoneRow, error) {
	var row dnsZoneRow
	err := tx.Raw(`SELECT * FROM dns_zones WHERE id = ? AND deleted_at IS NULL FOR `+strength, id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound("DNS zone", id)
	}
	return row, err
}

// UpdateDNSZone changes a zone's settings, nameservers or credentials
// (sealed anew) under If-Match. The zone's backoff ends and its records
// that failed are due again: the change may be what they waited for.
func (s *DNSStore) UpdateDNSZone(ctx context.Context, id string, match *int64, update fleet.DNSZoneUpdate) (fleet.DNSZone, error) {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := lockDNSZone(tx, id, "NO KEY UPDATE")
		if err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		next, err := update.Apply(row.toZone())
		if err != nil {
			return err
		}
		set := map[string]any{"settings": jsonText(dnsZoneSettings{RFC2136: next.RFC2136, Route53: next.Route53}),
			"nameservers": jsonText(next.Nameservers), "generation": gorm.Expr("generation + 1"), "updated_at": gorm.Expr("now()"),
			"attempts": 0, "last_error": "", "next_pass_at": nil}
		if update.Credentials != nil {
			sealed, err := s.sealDNSCredentials(update.Credentials, id)
			if err != nil {
				return err
			}
			set["credentials"], set["credentials_key_id"] = sealed.Data, nonEmpty(sealed.KeyID)
		}
		if err := tx.Table("dns_zones").Where("id = ?", id).Updates(set).Error; err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE dns_records SET next_pass_at = now() WHERE zone_id = ? AND deleted_at IS NULL
	AND next_pass_at > now() AND attempts > 0`, id).Error; err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelDNS, id)
	})
	if err != nil {
		return fleet.DNSZone{}, fmt.Errorf("UpdateDNSZone(%s): %w", id, err)
	}
	return s.FindDNSZone(ctx, id)
}

// DeleteDNSZone deletes a zone that holds no live service under If-Match.
// The row is locked against a service's creation, which shares its lock.
func (s *DNSStore) DeleteDNSZone(ctx context.Context, id string, match *int64) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		row, err := lockDNSZone(tx, id, "UPDATE")
		if err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		var services int64
		if err := tx.Table("dns_services").Where("zone_id = ? AND deleted_at IS NULL", id).Count(&services).Error; err != nil {
			return err
		}
		if services > 0 {
			return fleet.Errorf(fleet.CodeConflict, "the DNS zone holds %d services; delete them first", services)
		}
		return tx.Exec(`UPDATE dns_zones SET deleted_at = now(), updated_at = now(), generation = generation + 1 WHERE id = ?`, id).Error
	})
	if err != nil {
		return fmt.Errorf("DeleteDNSZone(%s): %w", id, err)
	}
	return nil
}
