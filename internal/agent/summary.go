package agent

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// Bounds of the private API a summary keeps to, so one odd cluster never
// gets a whole batch refused.
const (
	maxConditions    = 64
	maxMessage       = 32768
	maxReason        = 1024
	maxShortString   = 64
	maxConditionType = 316
)

// hubCondition is a ManagedCluster condition as read from the hub.
type hubCondition struct {
	Type, Status, Reason, Message string
	LastTransitionTime            *time.Time
}

// hubConditions reads status.conditions of a ManagedCluster.
func hubConditions(mc *unstructured.Unstructured) []hubCondition {
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	out := make([]hubCondition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		c := hubCondition{Type: str(m["type"]), Status: str(m["status"]), Reason: str(m["reason"]), Message: str(m["message"])}
		if c.Type == "" {
			continue
		}
		if t, err := time.Parse(time.RFC3339, str(m["lastTransitionTime"])); err == nil {
			t = t.UTC()
			c.LastTransitionTime = &t
		}
		out = append(out, c)
	}
	return out
}

// hubConditionStatus returns the status of the condition t of mc, "" when absent.
func hubConditionStatus(mc *unstructured.Unstructured, t string) string {
	for _, c := range hubConditions(mc) {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// summarize returns the inventory summary of a ManagedCluster: its identity,
// labels, claims, every capacity and allocatable key (as quantity strings),
// conditions and Kubernetes version.
func summarize(mc *unstructured.Unstructured) private.ManagedClusterSummary {
	s := private.ManagedClusterSummary{
		Name:            mc.GetName(),
		Uid:             nonEmpty(truncate(string(mc.GetUID()), maxShortString)),
		ResourceVersion: nonEmpty(truncate(mc.GetResourceVersion(), maxShortString)),
		Labels:          nonEmptyMap(maps.Clone(mc.GetLabels())),
		Claims:          nonEmptyMap(clusterClaims(mc)),
		Capacity:        nonEmptyMap(quantities(mc, "capacity")),
		Allocatable:     nonEmptyMap(quantities(mc, "allocatable")),
	}
	if ts := mc.GetCreationTimestamp(); !ts.IsZero() {
		t := ts.UTC()
		s.CreatedAt = &t
	}
	if v, _, _ := unstructured.NestedString(mc.Object, "status", "version", "kubernetes"); v != "" {
		s.KubernetesVersion = nonEmpty(truncate(v, maxShortString))
	}
	if conds := hubConditions(mc); len(conds) > 0 {
		out := make([]private.ClusterCondition, 0, min(len(conds), maxConditions))
		for _, c := range conds[:min(len(conds), maxConditions)] {
			out = append(out, private.ClusterCondition{
				Type: truncate(c.Type, maxConditionType), Status: truncate(c.Status, 16),
				Reason: nonEmpty(truncate(c.Reason, maxReason)), Message: nonEmpty(truncate(c.Message, maxMessage)),
				LastTransitionTime: c.LastTransitionTime,
			})
		}
		s.Conditions = &out
	}
	return s
}

// clusterClaims reads status.clusterClaims as name to value.
func clusterClaims(mc *unstructured.Unstructured) map[string]string {
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "clusterClaims")
	out := make(map[string]string, len(raw))
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok && str(m["name"]) != "" {
			out[str(m["name"])] = str(m["value"])
		}
	}
	return out
}

// quantities reads status.<field> keeping every key: a value that parses as
// a quantity is written in its canonical form, any other as it is.
func quantities(mc *unstructured.Unstructured, field string) map[string]string {
	raw, _, _ := unstructured.NestedMap(mc.Object, "status", field)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s := fmt.Sprint(v)
		if q, err := resource.ParseQuantity(s); err == nil {
			s = q.String()
		}
		out[k] = s
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonEmptyMap(m map[string]string) *map[string]string {
	if len(m) == 0 {
		return nil
	}
	return &m
}
