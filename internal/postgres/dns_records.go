package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// dnsRecordRow is a record as its table holds it; ServiceName, ConsoleURL
// and ClusterGone are read by ClaimDNSZones only.
type dnsRecordRow struct {
	ID                  string
	ServiceID           string
	ZoneID              string
	OrgID               string
	CreatedBy           string
	Instance            string
	Name                string
	Type                string
	TTL                 int      `gorm:"column:ttl"`
	Targets             []string `gorm:"serializer:json"`
	ClusterID           string
	Generation          int64
	Conditions          fleet.Conditions `gorm:"serializer:json"`
	Phase               string
	Published           *fleet.DNSRecordSet `gorm:"serializer:json"`
	PublishedGeneration int64
	ChangeID            string
	Attempts            int
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
	ServiceName         string `gorm:"->"`
	ConsoleURL          string `gorm:"->"`
	ClusterGone         bool   `gorm:"->"`
}

func (r dnsRecordRow) toRecord(serviceName string) fleet.DNSRecord {
	rec := fleet.DNSRecord{ID: r.ID, ServiceID: r.ServiceID, ServiceName: serviceName, ZoneID: r.ZoneID, OrgID: r.OrgID,
		CreatedBy: r.CreatedBy, Instance: r.Instance, Name: r.Name, Type: fleet.DNSRecordType(r.Type), TTL: r.TTL,
		Targets: nonNil(r.Targets), ClusterID: r.ClusterID, Generation: r.Generation, Values: []string{}, Conditions: r.Conditions,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, DeletionRequestedAt: r.DeletionRequestedAt}
	if r.Published != nil {
		rec.Values = nonNil(r.Published.Values)
	}
	return rec
}

var dnsRecordList = listSpec{
	search: SearchSchema{
		"id": {Column: "d.id", Type: FieldText}, "instance": {Column: "d.instance", Type: FieldText},
		"name": {Column: "d.name", Type: FieldText}, "type": {Column: "d.type", Type: FieldText},
		"phase": {Column: "d.phase", Type: FieldText}, "ttl": {Column: "d.ttl", Type: FieldInteger},
		"cluster_id": {Column: "d.cluster_id", Type: FieldText}, "created_by": {Column: "d.created_by", Type: FieldText},
		"created_at": {Column: "d.created_at", Type: FieldTimestamp}, "updated_at": {Column: "d.updated_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{"instance": "d.instance", "name": "d.name", "type": "d.type", "phase": "d.phase",
		"created_at": "d.created_at", "updated_at": "d.updated_at"},
	tiebreak:     "d.id",
	defaultOrder: "d.created_at",
}

// checkPoolCluster answers not found unless id is a live capacity-pool
// cluster of org: one that is not being removed, whose registration is
// neither deleted nor being deregistered.
func checkPoolCluster(tx *gorm.DB, org, id string) error {
	var live bool
	if err := tx.Raw(`SELECT EXISTS (`+livePoolClusterSQL+`)`, id, org).Scan(&live).Error; err != nil {
		return err
	}
	if !live {
		return notFound("cluster", id)
	}
	return nil
}

// livePoolClusterSQL selects a live pool cluster by id and organisation.
const livePoolClusterSQL = `SELECT 1 FROM pool_clusters pc JOIN registrations r ON r.id = pc.registration_id
WHERE pc.registration_id = ? AND pc.org_id = ? AND NOT pc.removing AND r.deleted_at IS NULL AND r.deletion_requested_at IS NULL`

// CreateDNSRecord creates an instance's record, named by its service's
// policy, due for dns_mgr at once. A live record of the same name, the
// caller's organisation and the same request is returned as it is (created
// false); any other holder of the name is refused alike, whoever it is.
func (s *DNSStore) CreateDNSRecord(ctx context.Context, caller fleet.Identity, service string, create fleet.DNSRecordCreate) (fleet.DNSRecord, bool, error) {
	if caller.OrgID == "" {
		return fleet.DNSRecord{}, false, fleet.Errorf(fleet.CodeOrgNotAllowed, "the token carries no organisation")
	}
	var row dnsRecordRow
	var svc dnsServiceRow
	created := false
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var err error
		if svc, err = lockWritableDNSService(ctx, tx, service, caller); err != nil {
			return err
		}
		c, err := create.Validate(svc.toService())
		if err != nil {
			return err
		}
		name, err := svc.toService().RecordName(c.Instance)
		if err != nil {
			return err
		}
		c.Targets = fleet.CanonicalDNSTargets(c.Type, c.Targets)
		if c.ClusterID != "" {
			if err := checkPoolCluster(tx, caller.OrgID, c.ClusterID); err != nil {
				return err
			}
		}
		conds := fleet.PendingDNSConditions(nil, 1, s.clock.Now())
		var inserted []dnsRecordRow
		if err := tx.Raw(`INSERT INTO dns_records (id, service_id, zone_id, org_id, created_by, instance, name, type, ttl, targets,
	cluster_id, conditions, phase) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) WHERE deleted_at IS NULL DO NOTHING RETURNING *`,
			newID(), svc.ID, svc.ZoneID, caller.OrgID, caller.Username, c.Instance, name, string(c.Type), c.TTL, jsonText(c.Targets),
			c.ClusterID, jsonText(conds), fleet.DNSRecordPhase(conds, false)).Scan(&inserted).Error; err != nil {
			return err
		}
		if len(inserted) == 1 {
			row, created = inserted[0], true
			return wakeAfterCommit(tx, ChannelDNS, row.ZoneID)
		}
		row, err = s.sameDNSRecord(tx, caller.OrgID, svc.ID, name, c)
		return err
	})
	if err != nil {
		return fleet.DNSRecord{}, false, fmt.Errorf("CreateDNSRecord(%s/%s): %w", caller.OrgID, service, err)
	}
	return row.toRecord(svc.Name), created, nil
}

// sameDNSRecord reads the live record that holds name and returns it when
// it is the organisation's and what c asks for. Any other holder is
// CodeNameTaken, with the same words whoever holds it, so that the refusal
// tells nothing of another organisation's records.
func (s *DNSStore) sameDNSRecord(tx *gorm.DB, org, serviceID, name string, c fleet.DNSRecordCreate) (dnsRecordRow, error) {
	var held []dnsRecordRow
	if err := tx.Raw(`SELECT * FROM dns_records WHERE name = ? AND deleted_at IS NULL`, name).Scan(&held).Error; err != nil {
		return dnsRecordRow{}, err
	}
	if len(held) == 0 {
		// Removed since the insert met it: the caller tries again.
		return dnsRecordRow{}, fleet.Errorf(fleet.CodeConflict, "the instance's record changed meanwhile; try again")
	}
	r := held[0]
	if r.OrgID != org || r.ServiceID != serviceID || r.Type != string(c.Type) || r.TTL != c.TTL ||
		!slices.Equal(nonNil(r.Targets), c.Targets) || r.ClusterID != c.ClusterID {
		return dnsRecordRow{}, fleet.Errorf(fleet.CodeNameTaken, "instance: the instance's name holds another record")
	}
	if r.DeletionRequestedAt != nil {
		return dnsRecordRow{}, fleet.Errorf(fleet.CodeConflict, "the instance's record is being deleted; create it again once it is gone")
	}
	return r, nil
}

// ListDNSRecords returns a page of the organisation's live records of a
// service. A caller of no organisation sees none.
func (s *DNSStore) ListDNSRecords(ctx context.Context, org string, service fleet.DNSService, q fleet.ListQuery) ([]fleet.DNSRecord, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	if org == "" {
		if _, _, _, err := searched(s.db.Gorm, dnsRecordList, q); err != nil {
			return nil, 0, err
		}
		return []fleet.DNSRecord{}, 0, nil
	}
	query := s.db.Gorm.WithContext(ctx).Table("dns_records AS d").
		Where("d.org_id = ? AND d.service_id = ? AND d.deleted_at IS NULL", org, service.ID)
	rows, total, err := list[dnsRecordRow](query, dnsRecordList, q, page, size)
	if err != nil {
		return nil, 0, fmt.Errorf("ListDNSRecords(%s/%s): %w", org, service.Name, err)
	}
	out := make([]fleet.DNSRecord, len(rows))
	for i, r := range rows {
		out[i] = r.toRecord(service.Name)
	}
	return out, total, nil
}

// FindDNSRecord returns one of the organisation's live records of a service.
func (s *DNSStore) FindDNSRecord(ctx context.Context, org string, service fleet.DNSService, id string) (fleet.DNSRecord, error) {
	row, err := findDNSRecord(s.db.Gorm.WithContext(ctx), org, service.ID, id, "")
	if err != nil {
		return fleet.DNSRecord{}, fmt.Errorf("FindDNSRecord(%s/%s): %w", org, service.Name, err)
	}
	return row.toRecord(service.Name), nil
}

// findDNSRecord reads (locks, with lock "FOR UPDATE") a live record of org
// and service. A caller of no organisation finds none.
func findDNSRecord(tx *gorm.DB, org, serviceID, id, lock string) (dnsRecordRow, error) {
	var rows []dnsRecordRow
	if org == "" {
		return dnsRecordRow{}, notFound("DNS record", id)
	}
	if err := tx.Raw(`SELECT * FROM dns_records WHERE id = ? AND org_id = ? AND service_id = ? AND deleted_at IS NULL `+lock,
		id, org, serviceID).Scan(&rows).Error; err != nil {
		return dnsRecordRow{}, err
	}
	if len(rows) == 0 {
		return dnsRecordRow{}, notFound("DNS record", id)
	}
	return rows[0], nil
}

// lockWritableDNSService locks the live service named name against its
// deletion (KEY SHARE: records' writes do not wait on each other) and
// refuses a caller that is not one of its writers (checkDNSWriter).
func lockWritableDNSService(ctx context.Context, tx *gorm.DB, name string, caller fleet.Identity) (dnsServiceRow, error) {
	svc, err := lockDNSServiceByName(tx, name, "KEY SHARE")
	if err != nil {
		return svc, err
	}
	return svc, checkDNSWriter(ctx, svc, caller)
}

// checkDNSWriter refuses, with CodeDNSWriterNotAllowed, a caller that is
// not one of the writers of svc as its locked row says: a writer the
// service dropped meanwhile writes nothing.
func checkDNSWriter(ctx context.Context, svc dnsServiceRow, caller fleet.Identity) error {
	if !svc.toService().MayWrite(fleet.SubjectFromContext(ctx, caller)) {
		return fleet.Errorf(fleet.CodeDNSWriterNotAllowed,
			"neither the caller's organisation nor its service account is one of the DNS service's writers")
	}
	return nil
}

// lockWrittenDNSRecord makes a record's change or deletion decisions in
// their one order: the service locked (404 when gone), the record of org
// locked into row (404 when org has none of that id), the caller one of the
// service's writers, then permit asked with the locked record.
func lockWrittenDNSRecord(ctx context.Context, tx *gorm.DB, permit fleet.Permit, org, service, id string,
	row *dnsRecordRow) (dnsServiceRow, error) {
	svc, err := lockDNSServiceByName(tx, service, "KEY SHARE")
	if err != nil {
		return svc, err
	}
	if *row, err = findDNSRecord(tx, org, svc.ID, id, "FOR UPDATE"); err != nil {
		return svc, err
	}
	if err := checkDNSWriter(ctx, svc, fleet.Identity{OrgID: org}); err != nil {
		return svc, err
	}
	return svc, permit(ctx, row.authzResource())
}

// authzResource is the record as the Authorizer sees it.
func (r dnsRecordRow) authzResource() fleet.AuthzResource {
	return fleet.AuthzResource{Kind: "dns_record", ID: r.ID, OrgID: r.OrgID, CreatedBy: r.CreatedBy}
}

// UpdateDNSRecord changes a record's type, target or TTL under If-Match,
// checked against its service's policy as it is now; a change makes a new
// generation, due for dns_mgr at once. A request that changes nothing
// leaves the record as it is.
func (s *DNSStore) UpdateDNSRecord(ctx context.Context, permit fleet.Permit, org string, service string, id string, match *int64, update fleet.DNSRecordUpdate) (fleet.DNSRecord, error) {
	var row dnsRecordRow
	err := s.transact(ctx, func(tx *gorm.DB) error {
		svc, err := lockWrittenDNSRecord(ctx, tx, permit, org, service, id, &row)
		if err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		if row.DeletionRequestedAt != nil {
			return fleet.Errorf(fleet.CodeConflict, "the DNS record is being deleted")
		}
		c, err := update.Apply(row.toRecord(svc.Name), svc.toService())
		if err != nil {
			return err
		}
		c.Targets = fleet.CanonicalDNSTargets(c.Type, c.Targets)
		if row.Type == string(c.Type) && row.TTL == c.TTL && slices.Equal(nonNil(row.Targets), c.Targets) && row.ClusterID == c.ClusterID {
			return nil
		}
		if c.ClusterID != "" && c.ClusterID != row.ClusterID {
			if err := checkPoolCluster(tx, org, c.ClusterID); err != nil {
				return err
			}
		}
		conds := fleet.PendingDNSConditions(row.Conditions, row.Generation+1, s.clock.Now())
		var updated []dnsRecordRow
		if err := tx.Raw(`UPDATE dns_records SET type = ?, ttl = ?, targets = ?, cluster_id = ?, conditions = ?, phase = ?,
	generation = generation + 1, updated_at = now(), next_pass_at = now(), attempts = 0, last_error = '' WHERE id = ? RETURNING *`,
			string(c.Type), c.TTL, jsonText(c.Targets), c.ClusterID, jsonText(conds), fleet.DNSRecordPhase(conds, false), id).
			Scan(&updated).Error; err != nil {
			return err
		}
		row = updated[0]
		return wakeAfterCommit(tx, ChannelDNS, row.ZoneID)
	})
	if err != nil {
		return fleet.DNSRecord{}, fmt.Errorf("UpdateDNSRecord(%s/%s): %w", org, service, err)
	}
	return row.toRecord(service), nil
}

// RequestDNSRecordDeletion starts a record's removal under If-Match: a new
// generation, due for dns_mgr at once, which soft-deletes the row once the
// provider removed the name. Asked again, it is done already.
func (s *DNSStore) RequestDNSRecordDeletion(ctx context.Context, permit fleet.Permit, org string, service string, id string, match *int64) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var row dnsRecordRow
		if _, err := lockWrittenDNSRecord(ctx, tx, permit, org, service, id, &row); err != nil {
			return err
		}
		if err := checkIfMatch(match, row.Generation); err != nil {
			return err
		}
		if row.DeletionRequestedAt != nil {
			return nil
		}
		if err := tx.Exec(`UPDATE dns_records SET deletion_requested_at = now(), phase = ?, generation = generation + 1, updated_at = now(),
	next_pass_at = now(), attempts = 0, last_error = '' WHERE id = ?`, fleet.DNSRecordPhase(row.Conditions, true), id).Error; err != nil {
			return err
		}
		return wakeAfterCommit(tx, ChannelDNS, row.ZoneID)
	})
	if err != nil {
		return fmt.Errorf("RequestDNSRecordDeletion(%s/%s): %w", org, service, err)
	}
	return nil
}
