package fleet

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"
)

// ScalerConfig holds the scaler's settings (docs/capacity-pools.md).
type ScalerConfig struct {
	// ScaleUpPercent and AddClusterPercent are the defaults of pools that
	// set none.
	ScaleUpPercent    int
	AddClusterPercent int
	// Step is how many nodes a scaled machine pool gains or loses at once.
	Step int
	// Cooldown is how long a cluster's nodes stay after a change before the
	// scaler lowers them again.
	Cooldown time.Duration
	// ScaleDownMarginPercent is the hysteresis: nodes go only when, without
	// them, the cluster would still be this many points below ScaleUpPercent.
	ScaleDownMarginPercent int
	// IdleTime is how long a cluster above the pool's minimum stays empty
	// before it is removed.
	IdleTime time.Duration
}

// DefaultScalerConfig returns the settings a fork starts from.
func DefaultScalerConfig() ScalerConfig {
	return ScalerConfig{ScaleUpPercent: 80, AddClusterPercent: 90, Step: 1, Cooldown: 5 * time.Minute,
		ScaleDownMarginPercent: 20, IdleTime: 30 * time.Minute}
}

// ScalerCluster is what the scaler knows of one pool cluster.
type ScalerCluster struct {
	ID               string
	State            PoolClusterState
	BlueprintVersion int
	Replicas         map[string]int
	CapacityUnits    int
	ReservedUnits    int
	// Joined is true once the cluster joined its hub (add-ons can go).
	Joined bool
	// AddOnsVersion is the blueprint version whose add-ons it was given (0: none).
	AddOnsVersion int
	ScaledAt      *time.Time
	EmptySince    *time.Time
}

// ScaleAction is one change the scaler decided.
type ScaleAction struct {
	// Type is a PoolEvent* constant.
	Type      string
	ClusterID string
	// Replicas are the cluster's new replicas (NodesScaled*, upgrades).
	Replicas map[string]int
	Reason   string
	Message  string
}

// ScalerInput is one pool's state for one scaler pass.
type ScalerInput struct {
	Pool     CapacityPool
	Spec     BlueprintSpec
	Clusters []ScalerCluster
	// Exhausted is true when a reservation found no room since the pool's
	// last added cluster.
	Exhausted bool
	Now       time.Time
}

// Scale decides one pass of a pool's scaling: the level-triggered rules of
// docs/capacity-pools.md, in order. It is pure: the pool reconciler applies
// what it returns and records each action as an event.
func Scale(in ScalerInput, cfg ScalerConfig) []ScaleAction {
	p := in.Pool
	scaleUp, addAt := pct(p.ScaleUpPercent, cfg.ScaleUpPercent), pct(p.AddClusterPercent, cfg.AddClusterPercent)
	var out []ScaleAction
	if p.DeletionRequestedAt != nil {
		for _, c := range in.Clusters {
			if c.State != PoolClusterDeprovisioning {
				out = append(out, ScaleAction{Type: PoolEventClusterRemoved, ClusterID: c.ID, Reason: "PoolDeleted",
					Message: "the pool is being deleted"})
			}
		}
		return out
	}
	var live []ScalerCluster
	provisioning := 0
	for _, c := range in.Clusters {
		switch c.State {
		case PoolClusterDeprovisioning:
			continue
		case PoolClusterFailed:
			// A failed cluster holding reservations stays for its owners to
			// release them; it no longer counts towards the pool.
			if c.ReservedUnits == 0 {
				out = append(out, ScaleAction{Type: PoolEventClusterRemoved, ClusterID: c.ID, Reason: "ProvisionFailed",
					Message: "the cluster failed; a new one replaces it when the pool needs it"})
			}
			continue
		case PoolClusterProvisioning:
			provisioning++
		}
		live = append(live, c)
	}
	for _, c := range live {
		if a, ok := upgrade(c, p, in.Spec); ok {
			out = append(out, a)
			continue
		}
		if c.Joined && c.AddOnsVersion != p.BlueprintVersion && len(in.Spec.AddOns) > 0 {
			out = append(out, ScaleAction{Type: PoolEventAddOnsDelivered, ClusterID: c.ID, Reason: "ClusterJoined",
				Message: fmt.Sprintf("%d add-ons of blueprint version %d", len(in.Spec.AddOns), p.BlueprintVersion)})
		}
		if a, ok := scaleNodes(c, in.Spec, scaleUp, in.Now, cfg); ok {
			out = append(out, a)
		}
	}
	if missing := p.MinClusters - len(live); missing > 0 {
		for range missing {
			out = append(out, ScaleAction{Type: PoolEventClusterAdded, Reason: "BelowMinimum",
				Message: fmt.Sprintf("the pool has %d clusters, its minimum is %d", len(live), p.MinClusters)})
		}
		return out
	}
	if len(live) < p.MaxClusters && provisioning == 0 {
		if in.Exhausted {
			return append(out, ScaleAction{Type: PoolEventClusterAdded, Reason: "NoRoomForReservation",
				Message: "a reservation found no cluster with room for it"})
		}
		if len(live) > 0 && allAbove(live, addAt) {
			return append(out, ScaleAction{Type: PoolEventClusterAdded, Reason: "PoolFull",
				Message: fmt.Sprintf("every cluster has reserved at least %d%% of its capacity", addAt)})
		}
	}
	if a, ok := removeIdle(live, p, addAt, in.Now, cfg); ok {
		out = append(out, a)
	}
	return out
}

func pct(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// upgrade moves a cluster to the pool's blueprint version: fixed pools take
// the new counts, scaled pools keep their replicas within the new bounds,
// new pools start at their initial count.
func upgrade(c ScalerCluster, p CapacityPool, spec BlueprintSpec) (ScaleAction, bool) {
	if c.BlueprintVersion == p.BlueprintVersion {
		return ScaleAction{}, false
	}
	replicas := spec.InitialReplicas()
	for _, mp := range spec.ScaledPools() {
		if have, ok := c.Replicas[mp.Name]; ok {
			replicas[mp.Name] = min(max(have, mp.Autoscaling.Min), mp.Autoscaling.Max)
		}
	}
	return ScaleAction{Type: PoolEventClusterUpgraded, ClusterID: c.ID, Replicas: replicas, Reason: "PoolMovedVersion",
		Message: fmt.Sprintf("blueprint version %d to %d", c.BlueprintVersion, p.BlueprintVersion)}, true
}

// HoldableUnits is what a cluster's current nodes hold: its capacity scaled
// by its scaled machine pools' replicas over their maximum (all of it when
// the blueprint scales none).
func HoldableUnits(spec BlueprintSpec, replicas map[string]int, capacity int) int {
	cur, top := 0, 0
	for _, mp := range spec.ScaledPools() {
		cur += replicas[mp.Name]
		top += mp.Autoscaling.Max
	}
	if top == 0 {
		return capacity
	}
	return capacity * min(cur, top) / top
}

// scaleNodes raises a ready cluster's scaled pools by a step when its
// reservations reach scaleUp percent of what its nodes hold, and lowers them
// after the cool-down when, a step lower, it would still be ScaleDownMargin
// points below that.
func scaleNodes(c ScalerCluster, spec BlueprintSpec, scaleUp int, now time.Time, cfg ScalerConfig) (ScaleAction, bool) {
	if c.State != PoolClusterReady && c.State != PoolClusterScaling {
		return ScaleAction{}, false
	}
	step := max(cfg.Step, 1)
	holdable := HoldableUnits(spec, c.Replicas, c.CapacityUnits)
	if c.ReservedUnits*100 >= holdable*scaleUp {
		up, changed := stepReplicas(spec, c.Replicas, step)
		if changed {
			return ScaleAction{Type: PoolEventNodesScaledUp, ClusterID: c.ID, Replicas: up, Reason: "ThresholdReached",
				Message: fmt.Sprintf("%d of %d units the nodes hold are reserved (threshold %d%%)", c.ReservedUnits, holdable, scaleUp)}, true
		}
		return ScaleAction{}, false
	}
	if c.ScaledAt != nil && now.Sub(*c.ScaledAt) < cfg.Cooldown {
		return ScaleAction{}, false
	}
	down, changed := stepReplicas(spec, c.Replicas, -step)
	if !changed {
		return ScaleAction{}, false
	}
	lower := HoldableUnits(spec, down, c.CapacityUnits)
	if c.ReservedUnits*100 < lower*(scaleUp-cfg.ScaleDownMarginPercent) {
		return ScaleAction{Type: PoolEventNodesScaledDown, ClusterID: c.ID, Replicas: down, Reason: "BelowThreshold",
			Message: fmt.Sprintf("%d units reserved; %d fewer nodes per scaled pool still hold %d", c.ReservedUnits, step, lower)}, true
	}
	return ScaleAction{}, false
}

// stepReplicas moves every scaled pool by delta within its bounds.
func stepReplicas(spec BlueprintSpec, replicas map[string]int, delta int) (map[string]int, bool) {
	out := maps.Clone(replicas)
	if out == nil {
		out = map[string]int{}
	}
	changed := false
	for _, mp := range spec.ScaledPools() {
		have := replicas[mp.Name]
		want := min(max(have+delta, mp.Autoscaling.Min), mp.Autoscaling.Max)
		if want != have {
			out[mp.Name], changed = want, true
		}
	}
	return out, changed
}

func allAbove(clusters []ScalerCluster, percent int) bool {
	for _, c := range clusters {
		if c.State == PoolClusterProvisioning || c.ReservedUnits*100 < c.CapacityUnits*percent {
			return false
		}
	}
	return true
}

// removeIdle removes one cluster above the minimum that has been empty for
// the idle time, the longest-idle first, when the others would still be
// ScaleDownMargin points below the add threshold.
func removeIdle(live []ScalerCluster, p CapacityPool, addAt int, now time.Time, cfg ScalerConfig) (ScaleAction, bool) {
	if len(live) <= p.MinClusters {
		return ScaleAction{}, false
	}
	idle := make([]ScalerCluster, 0, len(live))
	for _, c := range live {
		if c.ReservedUnits == 0 && c.EmptySince != nil && now.Sub(*c.EmptySince) >= cfg.IdleTime && c.State != PoolClusterProvisioning {
			idle = append(idle, c)
		}
	}
	if len(idle) == 0 {
		return ScaleAction{}, false
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].EmptySince.Before(*idle[j].EmptySince) })
	victim := idle[0]
	reserved, capacity := 0, 0
	for _, c := range live {
		if c.ID != victim.ID {
			reserved, capacity = reserved+c.ReservedUnits, capacity+c.CapacityUnits
		}
	}
	if capacity > 0 && reserved*100 >= capacity*(addAt-cfg.ScaleDownMarginPercent) {
		return ScaleAction{}, false
	}
	return ScaleAction{Type: PoolEventClusterRemoved, ClusterID: victim.ID, Reason: "Idle",
		Message: fmt.Sprintf("empty for %s; the pool keeps %d clusters", now.Sub(*victim.EmptySince).Round(time.Second), len(live)-1)}, true
}

// PoolClaim is a pool the pool reconciler holds until its lease ends, with
// what the scaler decides from, read when it was claimed.
type PoolClaim struct {
	Input ScalerInput
	// Token names the claim: its pass is applied only while the pool still
	// holds it.
	Token string
}

// PoolQueue is the pool reconciler's work queue.
type PoolQueue interface {
	// ClaimPools leases up to limit pools that are due, or named in woken,
	// and reads each one's state. Each pool's token is owner, "/" and a
	// uuid of its own.
	ClaimPools(ctx context.Context, owner string, woken []string, limit int, lease time.Duration) ([]PoolClaim, error)
	// ReleasePools frees the pools that still hold a claim whose owner was
	// token (a claim whose answer was lost), and returns how many.
	ReleasePools(ctx context.Context, token string) (int, error)
	// ApplyPoolPass writes a pass's actions and their events, finishes a
	// deleted pool whose clusters are gone and releases the claim, due again
	// after resync (after a backoff when failed is set). It reports false,
	// writing nothing, when the claim was lost.
	ApplyPoolPass(ctx context.Context, claim PoolClaim, actions []ScaleAction, resync time.Duration, failed error) (bool, error)
}

// WakePoints returns, for each cluster of a pass that stays in the pool, the
// reserved units at which a booking on it must wake pool_mgr at once: the
// first of its node threshold (while its scaled pools can still grow) and
// its cluster threshold (while the pool may add a cluster), counted with the
// replicas the pass's actions leave it; past both, never (its capacity plus
// one). A booking below it cannot change the scaler's decision, so it waits
// for the resync; releases always do (scale-down waits on a cool-down and
// idle removal on the idle time anyway).
func WakePoints(in ScalerInput, actions []ScaleAction, cfg ScalerConfig) map[string]int {
	p := in.Pool
	replicas := map[string]map[string]int{}
	removed := map[string]bool{}
	added := 0
	for _, a := range actions {
		switch {
		case a.Type == PoolEventClusterRemoved:
			removed[a.ClusterID] = true
		case a.Type == PoolEventClusterAdded:
			added++
		case a.Replicas != nil:
			replicas[a.ClusterID] = a.Replicas
		}
	}
	live := added
	for _, c := range in.Clusters {
		if !removed[c.ID] && c.State != PoolClusterDeprovisioning && c.State != PoolClusterFailed {
			live++
		}
	}
	canAdd := p.DeletionRequestedAt == nil && live < p.MaxClusters
	out := make(map[string]int, len(in.Clusters))
	for _, c := range in.Clusters {
		if removed[c.ID] || c.State == PoolClusterDeprovisioning {
			continue
		}
		r := c.Replicas
		if next, ok := replicas[c.ID]; ok {
			r = next
		}
		at := c.CapacityUnits + 1
		if _, grows := stepReplicas(in.Spec, r, 1); grows {
			at = min(at, ceilDiv(HoldableUnits(in.Spec, r, c.CapacityUnits)*pct(p.ScaleUpPercent, cfg.ScaleUpPercent), 100))
		}
		if canAdd {
			at = min(at, ceilDiv(c.CapacityUnits*pct(p.AddClusterPercent, cfg.AddClusterPercent), 100))
		}
		out[c.ID] = at
	}
	return out
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Pool condition types and reasons.
const (
	// PoolConditionReady: the pool has at least min_clusters joined clusters.
	PoolConditionReady = "Ready"
	// PoolConditionCapacityAvailable: the pool can take more bookings or
	// grow; False when it is at max_clusters and every cluster is past its
	// cluster threshold.
	PoolConditionCapacityAvailable = "CapacityAvailable"
	// PoolConditionQuotaAvailable: the organisation's limits allowed the
	// clusters the pass wanted; False while they refuse one the pool still
	// wants (a ClusterNotAdded action).
	PoolConditionQuotaAvailable = "QuotaAvailable"

	ReasonMinimumReady = "MinimumReady"
	ReasonBelowMinimum = "BelowMinimum"
	ReasonPoolDeleting = "Deleting"
	ReasonRoomLeft     = "RoomLeft"
	ReasonAtMaximum    = "AtMaximum"
	ReasonWithinQuota  = "WithinQuota"
)

// PoolConditions returns the pool's conditions after a pass that took
// actions: how many of its clusters are joined against its minimum, and
// whether it can still take bookings or grow. Each carries the pool's
// generation; times move only with the status (Conditions.Set).
func PoolConditions(have Conditions, in ScalerInput, actions []ScaleAction, cfg ScalerConfig) Conditions {
	p := in.Pool
	removed := map[string]bool{}
	added := 0
	quota := Condition{Type: PoolConditionQuotaAvailable, Status: ConditionTrue, Reason: ReasonWithinQuota,
		Message: "the organisation's limits allow the clusters the pool asks for", ObservedGeneration: p.Generation}
	for _, a := range actions {
		switch a.Type {
		case PoolEventClusterRemoved:
			removed[a.ClusterID] = true
		case PoolEventClusterAdded:
			added++
		case PoolEventClusterNotAdded:
			quota.Status, quota.Reason, quota.Message = ConditionFalse, a.Reason, a.Message
		}
	}
	ready, live, failed, full := 0, added, 0, added == 0
	addAt := pct(p.AddClusterPercent, cfg.AddClusterPercent)
	for _, c := range in.Clusters {
		switch {
		case removed[c.ID] || c.State == PoolClusterDeprovisioning:
			continue
		case c.State == PoolClusterFailed:
			failed++
			continue
		}
		live++
		if c.State == PoolClusterReady || c.State == PoolClusterScaling {
			ready++
		}
		if c.State == PoolClusterProvisioning || c.ReservedUnits*100 < c.CapacityUnits*addAt {
			full = false
		}
	}
	msg := fmt.Sprintf("%d of %d clusters ready (minimum %d, maximum %d)", ready, live, p.MinClusters, p.MaxClusters)
	if failed > 0 {
		msg += fmt.Sprintf("; %d failed", failed)
	}
	readyCond := Condition{Type: PoolConditionReady, Status: ConditionTrue, Reason: ReasonMinimumReady, Message: msg, ObservedGeneration: p.Generation}
	switch {
	case p.DeletionRequestedAt != nil:
		readyCond.Status, readyCond.Reason, readyCond.Message = ConditionFalse, ReasonPoolDeleting, "the pool is being deleted; "+msg
	case ready < p.MinClusters:
		readyCond.Status, readyCond.Reason = ConditionFalse, ReasonBelowMinimum
	}
	room := Condition{Type: PoolConditionCapacityAvailable, Status: ConditionTrue, Reason: ReasonRoomLeft,
		Message: "clusters have room, or the pool may add one", ObservedGeneration: p.Generation}
	if full && live >= p.MaxClusters {
		room.Status, room.Reason = ConditionFalse, ReasonAtMaximum
		room.Message = fmt.Sprintf("all %d clusters have reserved %d%% of their capacity and the pool is at max_clusters", live, addAt)
	}
	return have.Set(readyCond, in.Now).Set(room, in.Now).Set(quota, in.Now)
}

// PoolPhase summarises a pool's conditions: deleting, provisioning (below
// its minimum), full (no room and no growth left) or ready.
func PoolPhase(cs Conditions, deletionRequested bool) string {
	switch {
	case deletionRequested:
		return "deleting"
	case !cs.IsTrue(PoolConditionReady):
		return "provisioning"
	case cs.Status(PoolConditionCapacityAvailable) == ConditionFalse:
		return "full"
	default:
		return "ready"
	}
}
