package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// sqlTxReadOnlyRepeatable reads a consistent snapshot.
var sqlTxReadOnlyRepeatable = sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}

// DesiredSet returns the hub's desired set at its current revision: every
// live registration placed on it and not withdrawn, rendered as hub objects.
// The revision and the rows are read in one snapshot, only the columns the
// objects are made of; the snapshot's connection goes back to the pool before
// the credentials are opened and the objects rendered, so a hub of thousands
// of registrations holds a connection for its reads only.
func (s *HubStore) DesiredSet(ctx context.Context, hubID, agentIdentity string) (fleet.DesiredSet, error) {
	return s.DesiredChanges(ctx, hubID, agentIdentity, 0)
}

// DesiredChanges returns the changes to the hub's desired set since revision
// since (ADR 0017): the live registrations published after it, rendered,
// and the ids of those withdrawn after it. Every change to a registration's
// entry publishes it anew (DeliverBatch) or withdraws it (Withdraw), and a
// withdrawal is final, so the two lists hold every change; both are read
// through an index on (hub_id, revision), so a delta costs what changed, not
// what the hub holds. A since past the hub's revision (the database was
// restored to an earlier point, say) gets the full set.
func (s *HubStore) DesiredChanges(ctx context.Context, hubID, agentIdentity string, since int64) (fleet.DesiredSet, error) {
	since = max(since, 0)
	set := fleet.DesiredSet{HubID: hubID}
	snap, err := s.desiredSnapshot(ctx, hubID, agentIdentity, since)
	if err != nil {
		return set, fmt.Errorf("DesiredSet(%s): %w", hubID, err)
	}
	set.Revision, set.BaseRevision, set.Policies, set.Removed = snap.revision, snap.base, snap.policies, snap.removed
	set.RevisionHistory = snap.history
	set.Registrations = make([]fleet.DesiredRegistration, 0, len(snap.rows))
	for _, r := range snap.rows {
		reg := fleet.Registration{ID: r.ID, OrgID: r.OrgID, Name: r.Name, Labels: r.Labels, Generation: r.Generation}
		entry := fleet.DesiredRegistration{RegistrationID: reg.ID, Generation: reg.Generation, ManagedClusterName: fleet.ManagedClusterName(reg)}
		// Credentials that cannot be opened fail this registration only.
		if pd, ok := snap.pools[r.ID]; ok {
			entry.Objects, entry.Failure = s.pools.poolClusterObjects(reg, hubID, pd)
		} else if creds, err := s.openCredentials(registrationRow{ID: r.ID, Credentials: r.Credentials, CredentialsKeyID: r.CredentialsKeyID}); err != nil {
			entry.Failure = &fleet.DeliveryFailure{RegistrationID: reg.ID, Reason: fleet.ReasonCredentialsUnreadable,
				Message: "the fleet manager cannot open the registration's import credentials"}
		} else {
			entry.Objects = fleet.DesiredObjects(reg, hubID, creds)
		}
		set.Registrations = append(set.Registrations, entry)
	}
	return set, nil
}

// desiredRegistrationRow is what a registration's hub objects are made of.
type desiredRegistrationRow struct {
	ID               string
	OrgID            string
	Name             string
	Labels           map[string]string `gorm:"serializer:json"`
	Generation       int64
	Credentials      []byte
	CredentialsKeyID *string
}

// desiredRead is what one snapshot of a hub's desired set reads.
type desiredRead struct {
	revision, base int64
	history        string
	rows           []desiredRegistrationRow
	removed        []string
	policies       []fleet.DesiredPolicy
	// pools holds what the rows' pool clusters are made of, by registration.
	pools map[string]poolDeliveryRow
}

// desiredColumns are the columns a registration's entry is made of.
const desiredColumns = "id, org_id, name, labels, generation, credentials, credentials_key_id"

// desiredSnapshot reads, in one read-only snapshot, the hub's revision, its
// live registrations not withdrawn, oldest first, and its policies; with
// since from 1 to the hub's revision, only the registrations published after
// since, and the ids of those withdrawn after it.
func (s *HubStore) desiredSnapshot(ctx context.Context, hubID, agentIdentity string, since int64) (desiredRead, error) {
	var out desiredRead
	tx := s.db.Gorm.WithContext(ctx).Begin(&sqlTxReadOnlyRepeatable)
	if tx.Error != nil {
		return out, tx.Error
	}
	defer tx.Rollback()
	hub, err := s.agentHub(tx, hubID, agentIdentity, false)
	if err != nil {
		return out, err
	}
	out.revision, out.history = hub.Revision, hub.RevisionHistory
	live := tx.Table("registrations").Select(desiredColumns).Where("hub_id = ? AND deleted_at IS NULL AND withdrawn_revision IS NULL", hubID)
	if since > 0 && since <= hub.Revision {
		out.base = since
		// The conditions repeat the partial indexes' predicates
		// (migration202612020100DesiredChanges) so the planner takes them.
		live = live.Where("published_revision IS NOT NULL AND published_revision > ?", since)
		if err := tx.Raw(`SELECT id FROM registrations WHERE hub_id = ? AND withdrawn_revision IS NOT NULL AND withdrawn_revision > ?
ORDER BY id`, hubID, since).Scan(&out.removed).Error; err != nil {
			return out, err
		}
	}
	if err := live.Order("created_at, id").Find(&out.rows).Error; err != nil {
		return out, err
	}
	if out.policies, err = s.desiredPolicies(tx, hubID, hub.OwnerOrgID); err != nil {
		return out, err
	}
	// Only a pool's clusters carry its label (pool_mgr sets it, callers may
	// not): a set without them costs no read.
	var ids []string
	for _, r := range out.rows {
		if r.Labels[fleet.LabelPoolID] != "" {
			ids = append(ids, r.ID)
		}
	}
	if out.pools, err = poolDeliveries(tx, ids); err != nil {
		return out, err
	}
	return out, nil
}

// desiredPolicyRow is a policy row with its body as stored, decoded row by
// row: a body no decoder takes fails its own policy, not the hub's set.
type desiredPolicyRow struct {
	ID         string
	OrgID      string
	Zone       string
	Name       string
	Body       string
	Selector   selectorJSON `gorm:"serializer:json"`
	Generation int64
}

// desiredPolicies renders the live policies placed on a hub, oldest first.
func (s *HubStore) desiredPolicies(tx *gorm.DB, hubID string, owner *string) ([]fleet.DesiredPolicy, error) {
	var rows []desiredPolicyRow
	if err := tx.Table("policies AS p").Select("p.id, p.org_id, p.zone, p.name, p.body::text AS body, p.selector, p.generation").
		Joins("JOIN policy_hubs ph ON ph.policy_id = p.id AND ph.hub_id = ?", hubID).Where("p.deleted_at IS NULL").
		Order("p.created_at, p.id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]fleet.DesiredPolicy, len(rows))
	for i, r := range rows {
		p, failure := r.decode()
		if failure != nil {
			out[i] = fleet.DesiredPolicy{PolicyID: r.ID, Generation: r.Generation, Failure: failure}
			continue
		}
		out[i] = fleet.PolicyHubObjects(p, hubID, owner != nil && *owner == r.OrgID, s.cfg.Policies)
	}
	return out, nil
}

// decode returns the policy of r, or why it cannot go to a hub: its body is
// nested deeper than fleet.MaxDeliveredDepth (which every decoder on the way
// takes with room to spare), or cannot be decoded.
func (r desiredPolicyRow) decode() (fleet.Policy, *fleet.DeliveryFailure) {
	p := fleet.Policy{ID: r.ID, OrgID: r.OrgID, Zone: r.Zone, Name: r.Name, Selector: r.Selector.selector(), Generation: r.Generation}
	if d := fleet.JSONDepth([]byte(r.Body)); d > fleet.MaxDeliveredDepth {
		return p, &fleet.DeliveryFailure{PolicyID: r.ID, Reason: fleet.ReasonObjectTooDeep,
			Message: fmt.Sprintf("the policy is nested %d levels deep, more than the %d a hub object may have", d, fleet.MaxDeliveredDepth)}
	}
	if err := json.Unmarshal([]byte(r.Body), &p.Body); err != nil {
		return p, &fleet.DeliveryFailure{PolicyID: r.ID, Reason: fleet.ReasonObjectUnreadable,
			Message: "the fleet manager cannot decode the stored policy"}
	}
	return p, nil
}

// openCredentials decrypts a registration's auto-import credentials.
func (s *HubStore) openCredentials(r registrationRow) (*fleet.ImportCredentials, error) {
	if len(r.Credentials) == 0 || r.CredentialsKeyID == nil {
		return nil, nil
	}
	plain, err := s.keyring.Open(secrets.Sealed{KeyID: *r.CredentialsKeyID, Data: r.Credentials}, aad("registrations", "credentials", r.ID))
	if err != nil {
		return nil, fmt.Errorf("registration %s credentials: %w", r.ID, err)
	}
	var creds fleet.ImportCredentials
	if err := json.Unmarshal(plain, &creds); err != nil {
		return nil, fmt.Errorf("registration %s credentials: %w", r.ID, err)
	}
	return &creds, nil
}
