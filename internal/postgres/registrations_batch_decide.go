package postgres

import (
	"context"

	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// batchDecisions are the Authorizer's decisions within one batch,
// remembered by product and live count: the items of a batch are many, its
// distinct questions few, and a refusal is logged once.
type batchDecisions struct {
	s       *RegistrationStore
	subject fleet.Subject
	// counted: the decisions are asked with the organisation's live count,
	// live when the batch began; high is the most an item can see.
	counted    bool
	live, high int64
	m          map[batchQuestion]error
	// below is allowedBelow's answer per product.
	below map[fleet.Product]int64
}

// item decides a create of product after accepted items of the batch were
// accepted. When counted, a count below the one its product is first refused
// at is allowed without asking again; at or above it, the Authorizer decides
// for that count.
func (d *batchDecisions) item(ctx context.Context, product fleet.Product, accepted int) error {
	if !d.counted {
		return d.decide(ctx, product, 0)
	}
	limit, ok := d.below[product]
	if !ok {
		var err error
		if limit, err = d.allowedBelow(ctx, product, d.live, d.high); err != nil {
			return err
		}
		d.below[product] = limit
	}
	if n := d.live + int64(accepted); n >= limit {
		return d.decide(ctx, product, n)
	}
	return nil
}

// allowedBelow returns the lowest live count in [low, high] at which a
// create of product is refused, high+1 when it is allowed at high, asking
// the Authorizer about a few counts by bisection: a decision that allows a
// create at a count allows it at every lower one, as a quota does. The
// error is the batch's, when a question is refused for the caller.
func (d *batchDecisions) allowedBelow(ctx context.Context, product fleet.Product, low, high int64) (int64, error) {
	refused := func(n int64) (bool, error) {
		err := d.decide(ctx, product, n)
		if err != nil && !itemRefusal(err) {
			return false, err
		}
		return err != nil, nil
	}
	if no, err := refused(high); err != nil || !no {
		return high + 1, err
	}
	if no, err := refused(low); err != nil || no {
		return low, err
	}
	for low+1 < high { // allowed at low, refused at high
		mid := low + (high-low)/2
		no, err := refused(mid)
		if err != nil {
			return 0, err
		}
		if no {
			high = mid
		} else {
			low = mid
		}
	}
	return high, nil
}

// batchQuestion is what a decision of a batch depends on besides its caller.
type batchQuestion struct {
	product fleet.Product
	live    int64
}

// decide returns the decision for a create of product with live
// registrations counted: nil, an item's refusal (itemRefusal), or the
// batch's error.
func (d *batchDecisions) decide(ctx context.Context, product fleet.Product, live int64) error {
	q := batchQuestion{product, live}
	err, ok := d.m[q]
	if !ok {
		err = d.s.authorizeCreate(ctx, d.subject, product, live)
		d.m[q] = err
	}
	return err
}

// itemRefusal reports whether err refuses one item of a batch rather than
// the caller: the product or the quota.
func itemRefusal(err error) bool {
	code := fleet.ErrorCodeOf(err)
	return code == fleet.CodeProductNotAccepted || code == fleet.CodeQuotaExceeded
}

// lockAndCount takes the organisation's advisory lock, as
// CreateRegistration does when it counts, and reads the organisation's live
// registrations from the counters, once; without counted it does nothing.
func lockAndCount(tx *gorm.DB, org string, counted bool) (int64, error) {
	if !counted {
		return 0, nil
	}
	if err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended('registrations:' || ?, 0))`, org).Error; err != nil {
		return 0, err
	}
	var live int64
	err := tx.Raw(`SELECT coalesce(sum(live), 0) FROM registration_counts WHERE org_id = ?`, org).Scan(&live).Error
	return live, err
}

// decideBatch decides the items still pending, in order, as one create
// after the other would be: the Authorizer (with the live count and the
// items accepted before, when counted), then the name, taken by a live
// registration (looked up here only when counted, under the lock; else the
// insert finds them) or by an earlier item. It builds the rows of the items
// accepted.
func (s *RegistrationStore) decideBatch(ctx context.Context, tx *gorm.DB, caller fleet.Identity, decisions *batchDecisions,
	batch []batchItem, a batchAnswer) error {
	taken := map[string]bool{}
	if decisions.counted {
		var err error
		if taken, err = s.takenNames(tx, caller.OrgID, batch, a); err != nil {
			return err
		}
	}
	first := map[string]int{}
	template := s.newRegistrationTemplate(caller)
	pending := int64(0)
	for i := range batch {
		if a.results[i].Err == nil && a.replays[i] == "" {
			pending++
		}
	}
	decisions.high = decisions.live + pending - 1
	for i := range batch {
		if a.results[i].Err != nil || a.replays[i] != "" {
			continue
		}
		name := batch[i].create.Name
		err := decisions.item(ctx, batch[i].create.Product, len(a.rows))
		j, dup := first[name]
		switch {
		case err != nil && !itemRefusal(err):
			return err
		case err != nil:
			a.results[i].Err = err
		case taken[name]:
			a.results[i].Err = fleet.Errorf(fleet.CodeNameTaken, "a cluster of this name is already registered in this organisation")
		case dup:
			a.results[i].Err = fleet.Errorf(fleet.CodeNameTaken, "item %d of the batch registers a cluster of this name", j)
		default:
			row, err := s.newRegistrationRow(template, batch[i].create)
			if err != nil {
				return err
			}
			first[name], a.rows[i] = i, row
		}
	}
	return nil
}

// takenNames returns which of the pending items' names a live registration
// of org has.
func (s *RegistrationStore) takenNames(tx *gorm.DB, org string, batch []batchItem, a batchAnswer) (map[string]bool, error) {
	var names []string
	for i := range batch {
		if a.results[i].Err == nil && a.replays[i] == "" {
			names = append(names, batch[i].create.Name)
		}
	}
	taken := map[string]bool{}
	if len(names) == 0 {
		return taken, nil
	}
	var found []string
	err := tx.Raw(`SELECT name FROM registrations WHERE org_id = ? AND deleted_at IS NULL AND name IN ?`, org, names).Scan(&found).Error
	for _, n := range found {
		taken[n] = true
	}
	return taken, err
}
