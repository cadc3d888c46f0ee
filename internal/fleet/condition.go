package fleet

import "time"

// ConditionStatus is True, False or Unknown, as in Kubernetes.
type ConditionStatus string

// The condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one observed fact about an object, in the Kubernetes shape.
// LastTransitionTime moves only when Status moves.
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason"`
	Message            string          `json:"message,omitempty"`
	ObservedGeneration int64           `json:"observed_generation"`
	LastTransitionTime time.Time       `json:"last_transition_time"`
}

// Conditions is an object's set of conditions, at most one per type.
type Conditions []Condition

// Get returns the condition of type t.
func (cs Conditions) Get(t string) (Condition, bool) {
	for _, c := range cs {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Status returns the status of type t, Unknown when absent.
func (cs Conditions) Status(t string) ConditionStatus {
	if c, ok := cs.Get(t); ok {
		return c.Status
	}
	return ConditionUnknown
}

// IsTrue reports whether the condition of type t is True.
func (cs Conditions) IsTrue(t string) bool { return cs.Status(t) == ConditionTrue }

// Reason returns the reason of type t, "" when absent.
func (cs Conditions) Reason(t string) string {
	c, _ := cs.Get(t)
	return c.Reason
}

// Set returns a copy of cs with c in place of the condition of its type. The
// last transition time is kept when the status did not change, and set to now
// when it did (or when the condition is new).
func (cs Conditions) Set(c Condition, now time.Time) Conditions {
	out := make(Conditions, 0, len(cs)+1)
	replaced := false
	for _, old := range cs {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status || old.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now.UTC()
		}
		out = append(out, c)
		replaced = true
	}
	if !replaced {
		c.LastTransitionTime = now.UTC()
		out = append(out, c)
	}
	return out
}

// MarkTrue returns cs with condition t True for the given reason.
func (cs Conditions) MarkTrue(t, reason, message string, generation int64, now time.Time) Conditions {
	return cs.Set(Condition{Type: t, Status: ConditionTrue, Reason: reason, Message: message, ObservedGeneration: generation}, now)
}

// MarkFalse returns cs with condition t False for the given reason.
func (cs Conditions) MarkFalse(t, reason, message string, generation int64, now time.Time) Conditions {
	return cs.Set(Condition{Type: t, Status: ConditionFalse, Reason: reason, Message: message, ObservedGeneration: generation}, now)
}

// MarkUnknown returns cs with condition t Unknown for the given reason.
func (cs Conditions) MarkUnknown(t, reason, message string, generation int64, now time.Time) Conditions {
	return cs.Set(Condition{Type: t, Status: ConditionUnknown, Reason: reason, Message: message, ObservedGeneration: generation}, now)
}

// Equal reports whether two condition sets say the same, ignoring order.
func (cs Conditions) Equal(other Conditions) bool {
	if len(cs) != len(other) {
		return false
	}
	for _, c := range cs {
		o, ok := other.Get(c.Type)
		if !ok || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message ||
			o.ObservedGeneration != c.ObservedGeneration || !o.LastTransitionTime.Equal(c.LastTransitionTime) {
			return false
		}
	}
	return true
}
