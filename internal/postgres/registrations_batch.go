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

// batchItem is one item of a batch create on its way through
// CreateRegistrations.
type batchItem struct {
	create fleet.RegistrationCreate
	key    string
	hash   string
}

// batchAnswer is what one transaction of CreateRegistrations decided: the
// results, and the replayed registrations still to be read.
type batchAnswer struct {
	results []fleet.RegistrationResult
	replays map[int]string
	rows    map[int]registrationRow
}

// errKeyRace is a transaction's end when a concurrent request stored one of
// the batch's idempotency keys after the batch read them: the batch runs
// again and replays it.
var errKeyRace = errors.New("an idempotency key of the batch was stored concurrently")

// CreateRegistrations registers a batch of clusters for caller, each item as
// CreateRegistration would alone, with one statement for the registrations,
// one for their idempotency keys and one wake-up for the batch, after the
// commit (wake.go). Like
// CreateRegistration, it takes the organisation's lock and counts its live
// registrations only when the Authorizer's decision can depend on the count
// (a quota); it counts once, and decides the items in order with the items
// accepted before them counted.
func (s *RegistrationStore) CreateRegistrations(ctx context.Context, caller fleet.Identity, items []fleet.RegistrationCreateItem) ([]fleet.RegistrationResult, error) {
	results := make([]fleet.RegistrationResult, len(items))
	batch := make([]batchItem, len(items))
	for i, it := range items {
		batch[i] = batchItem{create: it.Create, key: it.IdempotencyKey}
		results[i].Err = s.checkCreate(&batch[i].create)
		batch[i].hash = requestHash(batch[i].create)
	}
	if len(allPending(results)) == 0 {
		return results, nil
	}
	subject := fleet.SubjectFromContext(ctx, caller)
	var answer batchAnswer
	err := errKeyRace
	// Run again once when a concurrent request stored one of the keys: the
	// second run replays its item.
	for attempt := 0; attempt < 2 && errors.Is(err, errKeyRace); attempt++ {
		err = s.transact(ctx, func(tx *gorm.DB) error {
			var txErr error
			answer, txErr = s.createBatch(ctx, tx, caller, subject, batch, results)
			return txErr
		})
	}
	if errors.Is(err, errKeyRace) {
		err = &fleet.Error{Code: fleet.CodeConflict, Message: "a concurrent request used the Idempotency-Key; try again", Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("CreateRegistrations(%s): %w", caller.OrgID, err)
	}
	if len(answer.rows) > 0 {
		s.wake(ChannelRegistrations)
	}
	return answer.results, nil
}

// checkCreate applies the checks of CreateRegistration that need no
// database: the default zone, validation, and the zones this deployment serves.
func (s *RegistrationStore) checkCreate(create *fleet.RegistrationCreate) error {
	if create.Zone == "" {
		create.Zone = s.cfg.DefaultZone
	}
	if create.Zone == "" {
		return fleet.Errorf(fleet.CodeValidation, "zone is required")
	}
	if err := create.Validate(); err != nil {
		return err
	}
	return s.cfg.Zones.Check("cluster", create.Zone)
}

// createBatch is one transaction of CreateRegistrations. It works on a copy
// of the results, so that a transaction run again starts afresh.
func (s *RegistrationStore) createBatch(ctx context.Context, tx *gorm.DB, caller fleet.Identity, subject fleet.Subject,
	batch []batchItem, checked []fleet.RegistrationResult) (batchAnswer, error) {
	a := batchAnswer{results: append([]fleet.RegistrationResult(nil), checked...), replays: map[int]string{}, rows: map[int]registrationRow{}}
	counted := subject.OrgID != "" && s.countsLive()
	live, err := lockAndCount(tx, caller.OrgID, counted)
	if err != nil {
		return a, err
	}
	if err := s.replayKeys(tx, caller.OrgID, batch, a, allPending(a.results)); err != nil {
		return a, err
	}
	decisions := &batchDecisions{s: s, subject: subject, counted: counted, live: live,
		m: map[batchQuestion]error{}, below: map[fleet.Product]int64{}}
	if err := s.decideBatch(ctx, tx, caller, decisions, batch, a); err != nil {
		return a, err
	}
	created, err := s.insertBatch(tx, caller, a)
	if err != nil {
		return a, err
	}
	// An item whose name was taken may have lost to a concurrent request
	// with its idempotency key: now committed, that request is a replay.
	var lost []int
	for i := range batch {
		if _, ok := a.rows[i]; ok && !created[i] {
			delete(a.rows, i)
			a.results[i].Err = fleet.Errorf(fleet.CodeNameTaken, "a cluster of this name is already registered in this organisation")
			lost = append(lost, i)
		}
	}
	if err := s.replayKeys(tx, caller.OrgID, batch, a, lost); err != nil {
		return a, err
	}
	if err := s.storeBatchKeys(tx, caller.OrgID, batch, a); err != nil {
		return a, err
	}
	return a, s.answerReplays(ctx, tx, decisions, batch, a)
}

// allPending lists the items no check has refused yet.
func allPending(results []fleet.RegistrationResult) []int {
	var idx []int
	for i, r := range results {
		if r.Err == nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// replayKeys looks up, in one statement, the idempotency keys of the items
// idx: a key of the same request replays its registration, a key of
// another request refuses the item, an expired key is forgotten.
func (s *RegistrationStore) replayKeys(tx *gorm.DB, org string, batch []batchItem, a batchAnswer, idx []int) error {
	byKey := map[string]int{}
	for _, i := range idx {
		if batch[i].key != "" {
			byKey[batch[i].key] = i
		}
	}
	if len(byKey) == 0 {
		return nil
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	var prior []struct {
		Key            string
		RequestHash    string
		RegistrationID string
		Expired        bool
	}
	if err := tx.Raw(`SELECT key, request_hash, registration_id, created_at < now() - make_interval(secs => ?) AS expired
		FROM idempotency_keys WHERE org_id = ? AND key IN ?`, s.cfg.IdempotencyKeyTTL.Seconds(), org, keys).Scan(&prior).Error; err != nil {
		return err
	}
	var expired []string
	for _, p := range prior {
		i := byKey[p.Key]
		switch {
		case p.Expired:
			expired = append(expired, p.Key)
		case p.RequestHash != batch[i].hash:
			a.results[i].Err = errKeyReused()
		default:
			a.results[i].Err = nil
			a.replays[i] = p.RegistrationID
		}
	}
	if len(expired) > 0 {
		return tx.Exec(`DELETE FROM idempotency_keys WHERE org_id = ? AND key IN ?`, org, expired).Error
	}
	return nil
}

// newRegistrationTemplate is what every new registration of caller starts
// with: accepted, waiting for placement.
func (s *RegistrationStore) newRegistrationTemplate(caller fleet.Identity) registrationRow {
	now := s.clock.Now()
	conds := fleet.Conditions{}.
		MarkTrue(fleet.ConditionAccepted, fleet.ReasonValidated, "the registration passed validation, quota and access checks", 1, now).
		MarkUnknown(fleet.ConditionPlaced, fleet.ReasonNotPlaced, "waiting for placement", 1, now)
	row := registrationRow{OrgID: caller.OrgID, Owner: caller.Username, Conditions: conds, Generation: 1, HubConditions: fleet.Conditions{}}
	row.Phase = factsOf(row).phase()
	return row
}

// newRegistrationRow is the row of an accepted create, from template
// (newRegistrationTemplate), its credentials sealed to it.
func (s *RegistrationStore) newRegistrationRow(template registrationRow, create fleet.RegistrationCreate) (registrationRow, error) {
	row := template
	row.ID, row.Name, row.DisplayName, row.Labels = newID(), create.Name, create.DisplayName, create.Labels
	row.Zone, row.Region, row.Product = create.Zone, create.Region, string(create.Product)
	if row.Labels == nil {
		row.Labels = map[string]string{}
	}
	if create.Credentials != nil {
		plain, err := json.Marshal(create.Credentials)
		if err != nil {
			return row, err
		}
		sealed, err := s.seal(plain, "registrations", "credentials", row.ID)
		if err != nil {
			return row, err
		}
		row.Credentials, row.CredentialsKeyID = sealed.Data, &sealed.KeyID
	}
	return row, nil
}

// insertBatchSQL inserts the accepted rows in one statement; a name a live
// registration holds (committed, or committed by a concurrent create it
// waited for) is skipped, and the rows inserted are returned. Rows go in
// name order, so two batches that share names wait on each other's rows in
// the same order, never in a cycle.
const insertBatchSQL = `
INSERT INTO registrations (id, org_id, owner, name, display_name, labels, zone, region, product, credentials, credentials_key_id,
	conditions, phase, generation, hub_conditions, next_attempt_at)
SELECT x.id, ?, ?, x.name, x.display_name, x.labels, x.zone, x.region, x.product, decode(x.credentials, 'base64'), x.credentials_key_id,
	?::jsonb, ?, 1, '[]'::jsonb, now()
FROM jsonb_to_recordset(?::jsonb) AS x(id text, name text, display_name text, labels jsonb, zone text, region text,
	product text, credentials text, credentials_key_id text)
ORDER BY x.name
ON CONFLICT (org_id, name) WHERE deleted_at IS NULL DO NOTHING
RETURNING id, created_at, updated_at`

// insertBatch inserts the accepted rows and reports which items it created,
// filling in their timestamps.
func (s *RegistrationStore) insertBatch(tx *gorm.DB, caller fleet.Identity, a batchAnswer) (map[int]bool, error) {
	created := map[int]bool{}
	if len(a.rows) == 0 {
		return created, nil
	}
	type rowJSON struct {
		ID               string            `json:"id"`
		Name             string            `json:"name"`
		DisplayName      string            `json:"display_name"`
		Labels           map[string]string `json:"labels"`
		Zone             string            `json:"zone"`
		Region           string            `json:"region"`
		Product          string            `json:"product"`
		Credentials      []byte            `json:"credentials"`
		CredentialsKeyID *string           `json:"credentials_key_id"`
	}
	rows := make([]rowJSON, 0, len(a.rows))
	byID := make(map[string]int, len(a.rows))
	var template registrationRow
	for i := range len(a.results) {
		r, ok := a.rows[i]
		if !ok {
			continue
		}
		template, byID[r.ID] = r, i
		rows = append(rows, rowJSON{ID: r.ID, Name: r.Name, DisplayName: r.DisplayName, Labels: r.Labels, Zone: r.Zone,
			Region: r.Region, Product: r.Product, Credentials: r.Credentials, CredentialsKeyID: r.CredentialsKeyID})
	}
	var inserted []struct {
		ID        string
		CreatedAt time.Time
		UpdatedAt time.Time
	}
	err := tx.Raw(insertBatchSQL, caller.OrgID, caller.Username, jsonText(template.Conditions), template.Phase, jsonText(rows)).
		Scan(&inserted).Error
	for _, in := range inserted {
		i := byID[in.ID]
		r := a.rows[i]
		r.CreatedAt, r.UpdatedAt = in.CreatedAt, in.UpdatedAt
		a.rows[i], created[i] = r, true
	}
	return created, err
}

// storeBatchKeys stores, in one statement, the idempotency keys of the items
// created. A key stored meanwhile by a concurrent request ends the
// transaction with errKeyRace.
func (s *RegistrationStore) storeBatchKeys(tx *gorm.DB, org string, batch []batchItem, a batchAnswer) error {
	type keyJSON struct {
		Key            string `json:"key"`
		RequestHash    string `json:"request_hash"`
		RegistrationID string `json:"registration_id"`
	}
	var keys []keyJSON
	for i, r := range a.rows {
		if batch[i].key != "" {
			keys = append(keys, keyJSON{Key: batch[i].key, RequestHash: batch[i].hash, RegistrationID: r.ID})
		}
	}
	if len(keys) == 0 {
		return nil
	}
	err := tx.Exec(`INSERT INTO idempotency_keys (org_id, key, request_hash, registration_id)
		SELECT ?, k.key, k.request_hash, k.registration_id FROM jsonb_to_recordset(?::jsonb) AS k(key text, request_hash text, registration_id text)
		ORDER BY k.key`,
		org, jsonText(keys)).Error
	if c, ok := uniqueViolation(err); ok && c == "idempotency_keys_pkey" {
		return errKeyRace
	}
	return err
}

// answerReplays authorizes the replayed items as CreateRegistration does a
// replay (no registration counted) and reads their registrations as they
// are now, deleted or not, in one statement; it fills in every result.
func (s *RegistrationStore) answerReplays(ctx context.Context, tx *gorm.DB, decisions *batchDecisions, batch []batchItem, a batchAnswer) error {
	ids := make([]string, 0, len(a.replays))
	for i, id := range a.replays {
		err := decisions.decide(ctx, batch[i].create.Product, 0)
		switch {
		case err != nil && !itemRefusal(err):
			return err
		case err != nil:
			a.results[i].Err = err
			delete(a.replays, i)
		default:
			ids = append(ids, id)
		}
	}
	var rows []registrationRow
	if len(ids) > 0 {
		if err := registrations(tx).Where("r.id IN ?", ids).Find(&rows).Error; err != nil {
			return err
		}
	}
	byID := make(map[string]registrationRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	for i, id := range a.replays {
		a.results[i] = fleet.RegistrationResult{Registration: byID[id].toRegistration()}
	}
	for i, r := range a.rows {
		a.results[i] = fleet.RegistrationResult{Registration: r.toRegistration(), Created: true}
	}
	return nil
}
