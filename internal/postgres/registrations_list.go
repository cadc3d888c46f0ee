package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

var registrationList = listSpec{
	search: SearchSchema{
		"id": {Column: "r.id", Type: FieldText}, "name": {Column: "r.name", Type: FieldText},
		"display_name": {Column: "r.display_name", Type: FieldText}, "zone": {Column: "r.zone", Type: FieldText},
		"region": {Column: "r.region", Type: FieldText}, "product": {Column: "r.product", Type: FieldText},
		"phase": {Column: "r.phase", Type: FieldText}, "hub_id": {Column: "r.hub_id", Type: FieldText},
		"hub_name": {Column: "h.name", Type: FieldText}, "labels": {Column: "r.labels", Type: FieldLabels},
		"created_at": {Column: "r.created_at", Type: FieldTimestamp}, "updated_at": {Column: "r.updated_at", Type: FieldTimestamp},
	},
	orderBy: map[string]string{
		"name": "r.name", "display_name": "r.display_name", "zone": "r.zone", "region": "r.region",
		"product": "r.product", "phase": "r.phase", "created_at": "r.created_at", "updated_at": "r.updated_at",
	},
	tiebreak:     "r.id",
	defaultOrder: "r.created_at",
}

// registrationCountsSearch is the part of registrationList's search that
// registration_counts holds: a search on these fields alone is summed from
// the counters (registrationTotal), whatever its operators.
var registrationCountsSearch = SearchSchema{
	"zone": {Column: "c.zone", Type: FieldText}, "phase": {Column: "c.phase", Type: FieldText},
}

// ListRegistrations returns a page of org's live registrations and the
// total of the search, read in one round trip: the total summed from
// registration_counts when the search is on the phase and the zone only
// (or absent), else counted through an index; the page's ids found first
// (an index-only scan where the order and the search allow it: of
// registration_labels for one label's value in the default order), then
// their rows, so a deep page skips index entries rather than rows.
func (s *RegistrationStore) ListRegistrations(ctx context.Context, org string, q fleet.ListQuery) ([]fleet.Registration, int, error) {
	regs, total, err := s.listRegistrations(ctx, org, q)
	if err != nil {
		return nil, 0, fmt.Errorf("ListRegistrations(%s): %w", org, err)
	}
	return regs, total, nil
}

func (s *RegistrationStore) listRegistrations(ctx context.Context, org string, q fleet.ListQuery) ([]fleet.Registration, int, error) {
	page, size, err := s.pageBounds(q)
	if err != nil {
		return nil, 0, err
	}
	expr, conds, err := searchConditions(registrationList, q)
	if err != nil {
		return nil, 0, err
	}
	order, err := listOrder(registrationList, q)
	if err != nil {
		return nil, 0, err
	}
	if org == "" { // a caller without an org sees nothing
		return []fleet.Registration{}, 0, nil
	}
	db := s.db.Gorm.WithContext(ctx)
	var total int64
	counted := true
	count, err := s.registrationTotal(db, org, expr, conds, &total, &counted)
	if err != nil {
		return nil, 0, err
	}
	key, value, byLabel := labelEquality(expr)
	labelled := byLabel && inCreationOrder(order)
	order = registrationOrder(order)
	var ids *gorm.DB
	if labelled {
		ids = s.orgLabelled(db, org, key, value).Select("l.id").Order("l.created_at, l.id")
	} else {
		ids = conds.apply(s.orgRegistrations(db, org, expr).Select("r.id")).Order(order)
	}
	// The page's bounds are written into the statement, not bound: a generic
	// plan (below) would otherwise guess them, and join a tenth of the
	// organisation's registrations. Both are integers pageBounds checked.
	bounds := fmt.Sprintf("(? LIMIT %d OFFSET %d) AS p", size, (page-1)*size)
	pageQuery := db.Table(bounds, ids).Joins("JOIN registrations r ON r.id = p.id").
		Joins("LEFT JOIN hubs h ON h.id = r.hub_id").Select(registrationListColumns.sql).Order(order)
	rows := make([]registrationListRow, 0, size)
	list, err := built(pageQuery, func(tx *gorm.DB) *gorm.DB { return tx.Find(&rows) }, readRows(&rows))
	if err != nil {
		return nil, 0, err
	}
	// Planning this statement with its values is a large part of its cost,
	// and its plan is the same for every value when the values cannot choose
	// an index: reading registration_labels (the zone included in its
	// index), or an organisation's registrations without a search and with
	// no zone to test (docs/performance.md). A search's values, or the
	// zones, can.
	list.generic = labelled || (expr == nil && s.cfg.Zones.ServesAll())
	if err := roundTrip(db, count, list); err != nil {
		return nil, 0, err
	}
	if !counted {
		// The label's key left the counted set since the statement was built.
		if err := s.orgLabelled(db, org, key, value).Count(&total).Error; err != nil {
			return nil, 0, err
		}
	}
	regs := make([]fleet.Registration, len(rows))
	for i := range rows {
		if regs[i], err = rows[i].toRegistration(); err != nil {
			return nil, 0, err
		}
	}
	return regs, int(total), nil
}

// registrationOrder is order with registrationList's tiebreak, unless the
// name comes first: a live registration's name is unique in its
// organisation (registrations_org_name_live), so that order is total
// already, and follows that index alone.
func registrationOrder(order string) string {
	first, _, _ := strings.Cut(order, ",")
	if f := strings.Fields(first); len(f) > 0 && f[0] == registrationList.orderBy["name"] {
		return order
	}
	return order + ", " + registrationList.tiebreak
}

// orgRegistrations is org's live registrations r in the served zones, with
// their hubs h when expr searches by the hub's name. PostgreSQL drops a join
// that nothing reads, but only after it chose how to read r, as if the join
// read r.hub_id: the join would keep it from reading only an index.
func (s *RegistrationStore) orgRegistrations(db *gorm.DB, org string, expr fleet.SearchExpr) *gorm.DB {
	q := db.Table("registrations AS r")
	if searchReads(expr, func(field string) bool { return field == "hub_name" }) {
		q = q.Joins("LEFT JOIN hubs h ON h.id = r.hub_id")
	}
	return s.inServedZones(q.Where("r.org_id = ? AND r.deleted_at IS NULL", org), "r.zone")
}

// registrationTotal is the statement that reads the total of org's search
// into total: a sum over registration_counts when the search reads only what
// the counters hold (registrationCountsSearch), so the total of an
// organisation's whole list costs the same at any size; a sum over
// registration_label_counts when it is one equality of a label whose key
// is counted, read with whether the key is counted (counted; when it is not,
// the caller counts as below); a count of registration_labels' index
// entries when it is one equality of another label; else a count of the
// rows, which the indexes of migration202612011900RegistrationReads serve.
func (s *RegistrationStore) registrationTotal(db *gorm.DB, org string, expr fleet.SearchExpr, conds conditions, total *int64, counted *bool) (statement, error) {
	key, value, byLabel := labelEquality(expr)
	if byLabel && slices.Contains(s.cfg.CountedLabels, key) {
		sum := s.inServedZones(db.Table("registration_label_counts AS c").Where("c.org_id = ? AND c.key = ? AND c.value = ?", org, key, value), "c.zone")
		return built(sum.Select("coalesce(sum(c.live), 0)::bigint, EXISTS (SELECT 1 FROM inventory_counted_labels WHERE key = ?)", key),
			func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]countedSum{}) }, readOne(total, counted))
	}
	if byLabel {
		stmt, err := built(s.orgLabelled(db, org, key, value), func(tx *gorm.DB) *gorm.DB { return tx.Count(new(int64)) }, readOne(total))
		stmt.generic = true // one index whatever the values
		return stmt, err
	}
	if !searchesOnly(expr, registrationCountsSearch) {
		return built(conds.apply(s.orgRegistrations(db, org, expr)), func(tx *gorm.DB) *gorm.DB { return tx.Count(new(int64)) }, readOne(total))
	}
	sum := s.inServedZones(db.Table("registration_counts AS c").Where("c.org_id = ?", org), "c.zone")
	if expr != nil {
		where, args, err := BuildSearch(expr, registrationCountsSearch)
		if err != nil {
			return statement{}, err
		}
		sum = sum.Where(where, args...)
	}
	stmt, err := built(sum.Select("coalesce(sum(c.live), 0)::bigint"), func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]int64{}) }, readOne(total))
	// Without a search its values are the org and the zones, which choose
	// nothing in the plan of a sum over one org's counters: planned once.
	stmt.generic = expr == nil
	return stmt, err
}

// labelEquality is the key and the value of a search that is one equality
// of a label's value and nothing else.
func labelEquality(expr fleet.SearchExpr) (key, value string, ok bool) {
	facet, value, ok := countedFacet(expr)
	if !ok || !strings.HasPrefix(facet, "labels.") {
		return "", "", false
	}
	return facet[len("labels."):], value, true
}

// inCreationOrder reports whether order (listOrder's) is the list's default
// order, the one registration_labels keeps each label's registrations in.
func inCreationOrder(order string) bool {
	return order == registrationList.defaultOrder || order == registrationList.defaultOrder+" ASC"
}

// orgLabelled is org's live registrations in the served zones whose label
// key has value, as the rows l of registration_labels
// (migration202612020500RegistrationLabels): counted and paged from its
// index alone.
func (s *RegistrationStore) orgLabelled(db *gorm.DB, org, key, value string) *gorm.DB {
	q := db.Table("registration_labels AS l").Where("l.org_id = ? AND l.key = ? AND l.value = ?", org, key, value)
	return s.inServedZones(q, "l.zone")
}

// searchesOnly reports whether expr reads only fields of schema (a nil
// expr reads none).
func searchesOnly(expr fleet.SearchExpr, schema SearchSchema) bool {
	return !searchReads(expr, func(field string) bool { _, ok := schema[field]; return !ok })
}

// searchReads reports whether a predicate of expr is on a field that is.
func searchReads(expr fleet.SearchExpr, is func(field string) bool) bool {
	switch e := expr.(type) {
	case fleet.SearchAnd:
		return searchReads(e.Left, is) || searchReads(e.Right, is)
	case fleet.SearchOr:
		return searchReads(e.Left, is) || searchReads(e.Right, is)
	case fleet.SearchNot:
		return searchReads(e.X, is)
	case fleet.SearchPredicate:
		return is(e.Field)
	}
	return false
}

// registrationListRow is a registration as a list shows it: without its
// secrets (only whether it has credentials) and its queue bookkeeping.
type registrationListRow struct {
	ID                  string
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
	OrgID               string
	Owner               string
	Name                string
	DisplayName         string
	Labels              []byte // jsonb, as text
	Zone                string
	Region              string
	Product             string
	HasCredentials      bool
	HubID               *string
	DeliveredVia        string
	Conditions          []byte
	HubConditions       []byte
	Phase               string
	Generation          int64
	ObservedGeneration  int64
	HubName             *string
	HubZone             *string
	HubRegion           *string
}

// registrationListColumns are the columns of a registrationListRow: those
// of a registrations row r and of its hub h.
var registrationListColumns = newColumns([]column[registrationListRow]{
	{"r.id", func(r *registrationListRow) any { return &r.ID }},
	{"r.created_at", func(r *registrationListRow) any { return &r.CreatedAt }},
	{"r.updated_at", func(r *registrationListRow) any { return &r.UpdatedAt }},
	{"r.deletion_requested_at", func(r *registrationListRow) any { return &r.DeletionRequestedAt }},
	{"r.org_id", func(r *registrationListRow) any { return &r.OrgID }},
	{"r.owner", func(r *registrationListRow) any { return &r.Owner }},
	{"r.name", func(r *registrationListRow) any { return &r.Name }},
	{"r.display_name", func(r *registrationListRow) any { return &r.DisplayName }},
	{"r.labels", func(r *registrationListRow) any { return &r.Labels }},
	{"r.zone", func(r *registrationListRow) any { return &r.Zone }},
	{"r.region", func(r *registrationListRow) any { return &r.Region }},
	{"r.product", func(r *registrationListRow) any { return &r.Product }},
	{"coalesce(octet_length(r.credentials), 0) > 0 AS has_credentials", func(r *registrationListRow) any { return &r.HasCredentials }},
	{"r.hub_id", func(r *registrationListRow) any { return &r.HubID }},
	{"r.delivered_via", func(r *registrationListRow) any { return &r.DeliveredVia }},
	{"r.conditions", func(r *registrationListRow) any { return &r.Conditions }},
	{"r.hub_conditions", func(r *registrationListRow) any { return &r.HubConditions }},
	{"r.phase", func(r *registrationListRow) any { return &r.Phase }},
	{"r.generation", func(r *registrationListRow) any { return &r.Generation }},
	{"r.observed_generation", func(r *registrationListRow) any { return &r.ObservedGeneration }},
	{"h.name AS hub_name", func(r *registrationListRow) any { return &r.HubName }},
	{"h.zone AS hub_zone", func(r *registrationListRow) any { return &r.HubZone }},
	{"h.region AS hub_region", func(r *registrationListRow) any { return &r.HubRegion }},
}...)

func (r *registrationListRow) fields() []any { return registrationListColumns.fields(r) }

// toRegistration is r as the domain's registration, as registrationRow's
// toRegistration makes it.
func (r *registrationListRow) toRegistration() (fleet.Registration, error) {
	labels, err := decodeLabels(r.Labels)
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("registration %s: labels: %w", r.ID, err)
	}
	own, err := decodeConditions(r.Conditions)
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("registration %s: conditions: %w", r.ID, err)
	}
	hub, err := decodeConditions(r.HubConditions)
	if err != nil {
		return fleet.Registration{}, fmt.Errorf("registration %s: hub conditions: %w", r.ID, err)
	}
	row := registrationRow{
		ID: r.ID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, DeletionRequestedAt: r.DeletionRequestedAt,
		OrgID: r.OrgID, Owner: r.Owner, Name: r.Name, DisplayName: r.DisplayName, Labels: labels, Zone: r.Zone,
		Region: r.Region, Product: r.Product, HubID: r.HubID, DeliveredVia: r.DeliveredVia, Conditions: own,
		HubConditions: hub, Phase: r.Phase, Generation: r.Generation, ObservedGeneration: r.ObservedGeneration,
		HubName: r.HubName, HubZone: r.HubZone, HubRegion: r.HubRegion,
	}
	if r.HasCredentials {
		row.Credentials = []byte{1} // only whether there are any is read
	}
	return row.toRegistration(), nil
}
