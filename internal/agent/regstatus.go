package agent

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// The registration conditions the agent reports, and the reason of one the
// hub has not set yet.
const (
	ConditionJoined    = "Joined"
	ConditionAvailable = "Available"
	ReasonNotReported  = "HubHasNotReported"
)

// reasonPattern is what Kubernetes accepts as a condition reason; a hub
// reason that is not one is replaced by the hub condition's type.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// registrationStatus derives the status of the registration of mc: Joined is
// True when the hub accepted the cluster and it joined, False when either is
// False, Unknown otherwise; Available follows ManagedClusterConditionAvailable.
// Reasons, messages and transition times are the hub's; a transition time the
// hub did not give is now. manifests, when not empty, is the import material.
func registrationStatus(mc *unstructured.Unstructured, manifests string, now time.Time) private.RegistrationStatus {
	conds := hubConditions(mc)
	get := func(t string) *hubCondition {
		i := slices.IndexFunc(conds, func(c hubCondition) bool { return c.Type == t })
		if i < 0 {
			return nil
		}
		return &conds[i]
	}
	st := private.RegistrationStatus{
		RegistrationId: mc.GetLabels()[fleet.LabelRegistrationID],
		Conditions: []private.Condition{
			joinedCondition(get(fleet.HubConditionAccepted), get(fleet.HubConditionJoined), now),
			fromHub(ConditionAvailable, get(fleet.HubConditionAvailable), now),
		},
	}
	if manifests != "" {
		st.Import = &private.ImportMaterial{Manifests: manifests}
	}
	return st
}

func joinedCondition(accepted, joined *hubCondition, now time.Time) private.Condition {
	both := []*hubCondition{accepted, joined}
	for _, c := range both {
		if c != nil && c.Status == string(fleet.ConditionFalse) {
			return fromHub(ConditionJoined, c, now)
		}
	}
	if accepted != nil && joined != nil && accepted.Status == string(fleet.ConditionTrue) && joined.Status == string(fleet.ConditionTrue) {
		return fromHub(ConditionJoined, joined, now)
	}
	// Unknown: say why with the first condition not True yet, if any.
	for _, c := range both {
		if c == nil || c.Status != string(fleet.ConditionTrue) {
			cond := fromHub(ConditionJoined, c, now)
			cond.Status = private.Unknown
			return cond
		}
	}
	return fromHub(ConditionJoined, nil, now)
}

// fromHub returns the condition t mirroring the hub condition c (nil: not
// reported yet).
func fromHub(t string, c *hubCondition, now time.Time) private.Condition {
	if c == nil {
		return private.Condition{Type: t, Status: private.Unknown, Reason: ReasonNotReported, LastTransitionTime: now.UTC()}
	}
	out := private.Condition{Type: t, Status: private.Unknown, Reason: c.Reason, LastTransitionTime: now.UTC()}
	if s := private.ConditionStatus(c.Status); s.Valid() {
		out.Status = s
	}
	if !reasonPattern.MatchString(out.Reason) || len(out.Reason) > maxReason {
		out.Reason = c.Type
	}
	if c.Message != "" {
		out.Message = nonEmpty(truncate(c.Message, maxMessage))
	}
	if c.LastTransitionTime != nil {
		out.LastTransitionTime = *c.LastTransitionTime
	}
	return out
}

// importManifests returns the manifests of a cluster's import secret: the
// CRDs first, then the import objects, then any other key in name order, as
// one YAML stream.
func importManifests(secret *unstructured.Unstructured) (string, error) {
	data, _, err := unstructured.NestedStringMap(secret.Object, "data")
	if err != nil {
		return "", fmt.Errorf("import secret %s/%s: %w", secret.GetNamespace(), secret.GetName(), err)
	}
	rank := map[string]int{"crds.yaml": 0, "import.yaml": 1}
	keys := slices.SortedFunc(maps.Keys(data), func(a, b string) int {
		ra, oka := rank[a]
		rb, okb := rank[b]
		if !oka {
			ra = len(rank)
		}
		if !okb {
			rb = len(rank)
		}
		return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(a, b))
	})
	var docs []string
	for _, k := range keys {
		b, err := base64.StdEncoding.DecodeString(data[k])
		if err != nil {
			return "", fmt.Errorf("import secret %s/%s: key %s: %w", secret.GetNamespace(), secret.GetName(), k, err)
		}
		if doc := strings.Trim(string(b), "\n"); strings.TrimSpace(doc) != "" {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		return "", nil
	}
	return strings.Join(docs, "\n---\n") + "\n", nil
}

// statusHash identifies the content of a status item, so that an unchanged
// one is not sent again.
func statusHash(st private.RegistrationStatus) string {
	b, _ := json.Marshal(st)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
