package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// DNSManager is dns_mgr: it makes each zone's provider hold the records
// the API asked for. A pass claims the zones with records due (or woken by a
// change), pushes each zone's changes to its provider in one batch, checks
// that the zone's authoritative servers answer them, and records every
// record's conditions under the zone's claim. A batch the provider refuses
// is split until the refused records are alone, so one tenant's bad record
// fails only its own; a provider that does not answer fails the pass, and
// the zone and its records back off. Any number of replicas run it side by
// side: a zone's lease keeps them apart.
type DNSManager struct {
	cfg       Config
	queue     fleet.DNSQueue
	providers map[fleet.DNSProviderKind]fleet.DNSProvider
	resolver  fleet.DNSResolver
	clock     fleet.Clock
	owner     string
	logger    *slog.Logger
	metrics   *Metrics
	woken     *wokenSet
	// held are claims whose answer the database lost, freed when it
	// answers again.
	held heldClaims
}

// dnsZoneBatch is how many zones one pass claims; dnsLookups how many
// authoritative queries one zone's pass has in flight.
const (
	dnsZoneBatch = 20
	dnsLookups   = 16
)

// maxDNSReason bounds a provider's refusal as a condition's message.
const maxDNSReason = 512

// A record whose pass failed (a refusal, a provider or server that did not
// answer, an answer not there yet) is looked at again after dnsFirstRetry,
// doubled with each failed pass up to dnsMaxRetry.
const (
	dnsFirstRetry = 500 * time.Millisecond
	dnsMaxRetry   = 5 * time.Minute
)

// dnsRetry is the wait before the next pass of a record that failed
// attempts passes before this one.
func dnsRetry(attempts int) time.Duration {
	return min(dnsMaxRetry, dnsFirstRetry<<min(max(attempts, 0), 10))
}

// Results of a record's change at its provider, the values of the result
// label of the DNS metrics.
const (
	dnsPublished   = "published"
	dnsRemoved     = "removed"
	dnsRefused     = "refused"
	dnsUnavailable = "unavailable"
	// dnsOwnedElsewhere is a change refused because its name holds records
	// the deployment does not own.
	dnsOwnedElsewhere = "owned_elsewhere"
)

// NewDNSManager returns dns_mgr.
func NewDNSManager(cfg Config, queue fleet.DNSQueue, providers map[fleet.DNSProviderKind]fleet.DNSProvider, resolver fleet.DNSResolver,
	clock fleet.Clock, owner string, logger *slog.Logger, metrics *Metrics) *DNSManager {
	return &DNSManager{cfg: cfg, queue: queue, providers: providers, resolver: resolver, clock: clock, owner: owner,
		logger: logger.With("reconciler", "dns_mgr"), metrics: metrics, woken: newWokenSet()}
}

// Run passes at start, on every wake-up (its payload a zone id, claimed then
// even if its records are not due), when a pass left work or asked for a
// recheck, and every DNSResync.
func (m *DNSManager) Run(ctx context.Context, wake <-chan string) {
	kick := make(chan string, 1)
	if wake != nil {
		go m.woken.forward(ctx, wake, kick)
	}
	loop(ctx, "dns_mgr", kick, m.cfg.DNSResync, m.pass)
}

func (m *DNSManager) pass(ctx context.Context) (time.Duration, bool) {
	taken := m.woken.take()
	claims, leaseEnd, err := claimHeld(ctx, &m.held, m.owner, m.cfg.Lease, m.queue.ReleaseDNSZones,
		func(ctx context.Context, token string) ([]fleet.DNSZoneClaim, error) {
			return m.queue.ClaimDNSZones(ctx, token, sorted(taken), dnsZoneBatch, m.cfg.DNSBatch, m.cfg.Lease)
		})
	if err != nil {
		logFailure(ctx, m.logger, "claiming DNS zones", err)
		return m.cfg.Poll, true
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		again   = m.cfg.DNSResync
		full    = len(claims) == dnsZoneBatch
		claimed = make(map[string]bool, len(claims))
		slots   = make(chan struct{}, m.cfg.Workers)
	)
	for _, c := range claims {
		claimed[c.Zone.Zone.ID] = true
		full = full || len(c.Records) == m.cfg.DNSBatch
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if next, ok := m.reconcileZone(ctx, c, leaseEnd); ok {
				mu.Lock()
				again = min(again, next)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	switch pending := m.woken.settle(taken, claimed); {
	case full:
		return 0, true
	case pending:
		return wokenRetryDelay, true
	}
	return again, again < m.cfg.DNSResync
}

// change is one record's change in a zone's batch, with its result.
type change struct {
	index  int
	change fleet.DNSChange
	// done is set when the provider took the change, with id its change
	// id; refusal when it refused it; conflict when it refused it because
	// the name holds records the deployment does not own.
	done     bool
	id       string
	refusal  *fleet.DNSRefusal
	conflict string
}

// reconcileZone does one zone's pass, claimed until leaseEnd, and reports
// how soon a record of it wants the next (false: none asked).
func (m *DNSManager) reconcileZone(ctx context.Context, c fleet.DNSZoneClaim, leaseEnd time.Time) (time.Duration, bool) {
	defer logPanic(m.logger, c.Zone.Zone.ID)
	start := time.Now()
	zone := c.Zone
	now := m.clock.Now()
	outs := make([]fleet.DNSOutcome, len(c.Records))
	var changes []*change
	// checks are the records published to check; removals the removed
	// ones whose change the provider has not synced yet.
	var checks, removals []int
	for i, w := range c.Records {
		r := w.Record
		outs[i] = fleet.DNSOutcome{ID: r.ID, Generation: r.Generation, Conditions: r.Conditions}
		if r.DeletionRequestedAt != nil {
			switch {
			case w.Published != nil:
				changes = append(changes, &change{index: i, change: fleet.DNSChange{RecordID: r.ID, Previous: w.Published}})
			case w.ChangeID != "":
				removals = append(removals, i)
			default:
				outs[i].Delete = true
			}
			continue
		}
		desired, reason := w.Desired()
		switch {
		case desired == nil:
			outs[i].Conditions = setDNSCondition(outs[i].Conditions, fleet.DNSConditionPublished, fleet.ConditionFalse, reason,
				dnsWaitMessage(reason), r.Generation, now)
			if reason == fleet.DNSReasonWaitingForCluster {
				outs[i].RequeueAfter = m.cfg.DNSResync
			}
		case w.Published != nil && w.Published.Equal(*desired):
			// In place already: a change that moved nothing the provider
			// holds (or a pass after an unanswered check).
			outs[i].Publish, outs[i].Published, outs[i].PublishedGeneration, outs[i].ChangeID = true, w.Published, r.Generation, w.ChangeID
			outs[i].Conditions = setDNSCondition(outs[i].Conditions, fleet.DNSConditionPublished, fleet.ConditionTrue,
				fleet.DNSReasonPublished, "", r.Generation, now)
			checks = append(checks, i)
		default:
			changes = append(changes, &change{index: i, change: fleet.DNSChange{RecordID: r.ID, Upsert: desired, Previous: w.Published}})
		}
	}
	// The provider's calls end a fifth of the lease before it does, as
	// provisioning_mgr's deliveries do: the rest is for recording, so a slow
	// provider fails the pass instead of losing its claim.
	work, cancel := context.WithDeadline(ctx, leaseEnd.Add(-m.cfg.Lease/5))
	defer cancel()
	provider, ok := m.providers[zone.Zone.Provider]
	var zoneErr error
	if len(changes) > 0 {
		if !ok {
			zoneErr = errors.New("no provider of kind " + string(zone.Zone.Provider) + " in this deployment")
		} else {
			zoneErr = m.push(work, provider, zone, changes)
		}
	}
	for _, ch := range changes {
		m.recordChange(&outs[ch.index], c.Records[ch.index], ch, string(zone.Zone.Provider), &checks, &removals, now)
	}
	if zoneErr != nil && ctx.Err() == nil {
		m.logger.Warn("DNS provider did not take a zone's changes; the zone backs off", "zone_id", zone.Zone.ID,
			"provider", zone.Zone.Provider, "records", len(changes), errAttrs(zoneErr))
	}
	synced := map[string]bool{}
	if ok && len(removals) > 0 {
		m.checkRemovals(work, provider, zone, c.Records, outs, removals, synced)
	}
	if ok && len(checks) > 0 {
		m.check(work, provider, zone, c.Records, outs, checks, synced, now)
	}
	held, err := untilAnswered(ctx, func(ctx context.Context) (bool, error) {
		return m.queue.CompleteDNSZone(ctx, c, outs, zoneErr)
	})
	outcome := outcomeDone
	switch {
	case err != nil:
		outcome = outcomeError
		logFailure(ctx, m.logger, "recording a DNS zone's pass", err, "zone_id", zone.Zone.ID)
	case !held:
		outcome = outcomeLost
	case zoneErr != nil:
		outcome = outcomeError
	}
	m.metrics.duration.WithLabelValues("dns_mgr", outcome).Observe(time.Since(start).Seconds())
	next, wish := time.Duration(0), false
	for _, o := range outs {
		if o.RequeueAfter > 0 && (!wish || o.RequeueAfter < next) {
			next, wish = o.RequeueAfter, true
		}
	}
	return next, wish
}

// push sends changes to the provider, splitting a refused batch in halves
// until each refused change is alone (a refusal that names the changes
// whose names another owner holds fails those and sends the rest again);
// it returns the error of a provider
// that did not answer (the changes not taken yet stay undone).
func (m *DNSManager) push(ctx context.Context, p fleet.DNSProvider, zone fleet.DNSZoneAccess, changes []*change) error {
	batch := make([]fleet.DNSChange, len(changes))
	for i, ch := range changes {
		batch[i] = ch.change
	}
	id, err := p.Apply(ctx, zone, batch)
	var refusal *fleet.DNSRefusal
	switch {
	case err == nil:
		for _, ch := range changes {
			ch.done, ch.id = true, id
		}
		return nil
	case !errors.As(err, &refusal):
		return err
	case len(refusal.Conflicts) > 0:
		// The names another owner holds are named: they fail, the rest is
		// sent again without them.
		var rest []*change
		for _, ch := range changes {
			if reason, ok := refusal.Conflicts[ch.change.RecordID]; ok {
				ch.conflict = reason
			} else {
				rest = append(rest, ch)
			}
		}
		switch {
		case len(rest) == 0:
			return nil
		case len(rest) < len(changes):
			return m.push(ctx, p, zone, rest)
		}
	}
	if len(changes) == 1 {
		changes[0].refusal = refusal
		return nil
	}
	half := len(changes) / 2
	if err := m.push(ctx, p, zone, changes[:half]); err != nil {
		return err
	}
	return m.push(ctx, p, zone, changes[half:])
}

// recordChange sets a pushed record's outcome from its change's result.
func (m *DNSManager) recordChange(out *fleet.DNSOutcome, w fleet.DNSWork, ch *change, provider string, checks, removals *[]int,
	now time.Time) {
	r := w.Record
	switch {
	case ch.done && ch.change.Upsert == nil:
		// The row goes once the provider's servers no longer hold the name:
		// at once, or when its change is synced.
		out.Delete = ch.id == ""
		if !out.Delete {
			out.Publish, out.Published, out.ChangeID = true, nil, ch.id
			*removals = append(*removals, ch.index)
		}
		m.metrics.dnsChanges.WithLabelValues(provider, dnsRemoved).Inc()
	case ch.done:
		out.Publish, out.Published, out.PublishedGeneration, out.ChangeID = true, ch.change.Upsert, r.Generation, ch.id
		out.Conditions = setDNSCondition(out.Conditions, fleet.DNSConditionPublished, fleet.ConditionTrue, fleet.DNSReasonPublished,
			"", r.Generation, now)
		*checks = append(*checks, ch.index)
		m.metrics.dnsChanges.WithLabelValues(provider, dnsPublished).Inc()
	case ch.conflict != "":
		out.Failed, out.RequeueAfter = true, dnsRetry(w.Attempts)
		out.Conditions = setDNSCondition(out.Conditions, fleet.DNSConditionPublished, fleet.ConditionFalse, fleet.DNSReasonNameOwnedElsewhere,
			"the name is not this deployment's: "+ch.conflict+"; nothing there is changed, and the record is retried with backoff",
			r.Generation, now)
		m.metrics.dnsChanges.WithLabelValues(provider, dnsOwnedElsewhere).Inc()
	case ch.refusal != nil:
		out.Failed, out.RequeueAfter = true, dnsRetry(w.Attempts)
		reason := ch.refusal.Reason
		if len(reason) > maxDNSReason {
			reason = reason[:maxDNSReason]
		}
		out.Conditions = setDNSCondition(out.Conditions, fleet.DNSConditionPublished, fleet.ConditionFalse, fleet.DNSReasonProviderRefused,
			"the DNS provider refused the record: "+reason, r.Generation, now)
		m.metrics.dnsChanges.WithLabelValues(provider, dnsRefused).Inc()
	default:
		out.Failed, out.RequeueAfter = true, dnsRetry(w.Attempts)
		if r.DeletionRequestedAt == nil {
			out.Conditions = setDNSCondition(out.Conditions, fleet.DNSConditionPublished, fleet.ConditionFalse,
				fleet.DNSReasonProviderUnavailable, "the DNS provider did not answer; the change is retried with backoff", r.Generation, now)
		}
		m.metrics.dnsChanges.WithLabelValues(provider, dnsUnavailable).Inc()
	}
}

// check sets Resolvable on the records at checks: a change the provider has
// not synced yet, or a server that does not answer the record's values yet,
// leaves it False and the record is looked at again with backoff.
func (m *DNSManager) check(ctx context.Context, p fleet.DNSProvider, zone fleet.DNSZoneAccess, works []fleet.DNSWork,
	outs []fleet.DNSOutcome, checks []int, synced map[string]bool, now time.Time) {
	servers := zone.Zone.Nameservers
	if len(servers) == 0 {
		var err error
		if servers, err = p.Nameservers(ctx, zone); err != nil || len(servers) == 0 {
			for _, i := range checks {
				notResolvable(&outs[i], fleet.DNSReasonNameserverError, "the zone's authoritative servers are not known yet", works[i], now)
			}
			return
		}
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, dnsLookups)
	for _, i := range checks {
		out, w := &outs[i], works[i]
		if id := out.ChangeID; id != "" {
			if !isSynced(ctx, p, zone, id, synced) {
				notResolvable(out, fleet.DNSReasonNotAnswered, "the provider has not yet synced the change to its servers", w, now)
				continue
			}
			out.Synced = true
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			m.lookup(ctx, servers, out, w, now)
		})
	}
	wg.Wait()
}

// checkRemovals soft-deletes the removed records whose change the provider
// synced; the others are looked at again with backoff.
func (m *DNSManager) checkRemovals(ctx context.Context, p fleet.DNSProvider, zone fleet.DNSZoneAccess, works []fleet.DNSWork,
	outs []fleet.DNSOutcome, removals []int, synced map[string]bool) {
	for _, i := range removals {
		id := works[i].ChangeID
		if outs[i].Publish {
			id = outs[i].ChangeID
		}
		if isSynced(ctx, p, zone, id, synced) {
			outs[i].Delete = true
			continue
		}
		outs[i].Failed, outs[i].RequeueAfter = true, dnsRetry(works[i].Attempts)
	}
}

// isSynced asks the provider whether change id is synced, once a pass.
func isSynced(ctx context.Context, p fleet.DNSProvider, zone fleet.DNSZoneAccess, id string, synced map[string]bool) bool {
	ok, seen := synced[id]
	if !seen {
		ok, _ = p.Synced(ctx, zone, id)
		synced[id] = ok
	}
	return ok
}

// lookup asks every server for out's published set.
func (m *DNSManager) lookup(ctx context.Context, servers []string, out *fleet.DNSOutcome, w fleet.DNSWork, now time.Time) {
	want := out.Published
	for _, s := range servers {
		got, found, err := m.resolver.Lookup(ctx, s, want.Name, want.Type)
		switch {
		case err != nil:
			notResolvable(out, fleet.DNSReasonNameserverError, "an authoritative server of the zone did not answer", w, now)
			return
		case !found || !sameValues(want.Type, got, want.Values):
			notResolvable(out, fleet.DNSReasonNotAnswered, "an authoritative server does not answer the record's values yet", w, now)
			return
		}
	}
	out.Conditions = setDNSCondition(out.Conditions, fleet.DNSConditionResolvable, fleet.ConditionTrue, fleet.DNSReasonAnswered,
		"", w.Record.Generation, now)
}

func notResolvable(out *fleet.DNSOutcome, reason, message string, w fleet.DNSWork, now time.Time) {
	out.Failed, out.RequeueAfter = true, dnsRetry(w.Attempts)
	out.Conditions = setDNSCondition(out.Conditions, fleet.DNSConditionResolvable, fleet.ConditionFalse, reason, message,
		w.Record.Generation, now)
}

// sameValues compares a server's answer with the published values: host
// names as normalized, addresses by value (2001:db8::1 is 2001:0db8::1).
func sameValues(t fleet.DNSRecordType, got, want []string) bool {
	norm := func(vs []string) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = fleet.NormalizeDNSName(v)
			if t != fleet.DNSRecordCNAME {
				if a, err := netip.ParseAddr(v); err == nil {
					out[i] = a.String()
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(got), norm(want))
}

// dnsWaitMessage explains a record that waits on its cluster.
func dnsWaitMessage(reason string) string {
	if reason == fleet.DNSReasonClusterGone {
		return "the cluster the record follows is no longer a capacity pool cluster of the organisation"
	}
	return "the cluster the record follows has no known ingress yet; the record follows it when its console URL is reported"
}

func setDNSCondition(cs fleet.Conditions, typ string, status fleet.ConditionStatus, reason, message string, gen int64, now time.Time) fleet.Conditions {
	return cs.Set(fleet.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: gen}, now)
}
