package agent

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

func TestRegistrationStatusConditions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hubTime := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	cond := func(typ, status, reason string) string {
		return `{"type": "` + typ + `", "status": "` + status + `", "reason": "` + reason + `", "message": "m-` + typ + `", "lastTransitionTime": "2026-11-30T09:00:00Z"}`
	}
	accepted, joined, available := fleet.HubConditionAccepted, fleet.HubConditionJoined, fleet.HubConditionAvailable
	type want struct {
		status private.ConditionStatus
		reason string
		at     time.Time
	}
	tests := []struct {
		name          string
		conditions    string
		joined, avail want
	}{
		{
			name:       "nothing reported yet",
			conditions: ``,
			joined:     want{private.Unknown, ReasonNotReported, now},
			avail:      want{private.Unknown, ReasonNotReported, now},
		},
		{
			name:       "accepted, not joined yet",
			conditions: cond(accepted, "True", "HubClusterAdminAccepted"),
			joined:     want{private.Unknown, ReasonNotReported, now},
			avail:      want{private.Unknown, ReasonNotReported, now},
		},
		{
			name:       "accepted and joined, available",
			conditions: cond(accepted, "True", "HubClusterAdminAccepted") + "," + cond(joined, "True", "ManagedClusterJoined") + "," + cond(available, "True", "ManagedClusterAvailable"),
			joined:     want{private.True, "ManagedClusterJoined", hubTime},
			avail:      want{private.True, "ManagedClusterAvailable", hubTime},
		},
		{
			name:       "joined but the hub denied it",
			conditions: cond(accepted, "False", "HubClusterAdminDenied") + "," + cond(joined, "True", "ManagedClusterJoined"),
			joined:     want{private.False, "HubClusterAdminDenied", hubTime},
			avail:      want{private.Unknown, ReasonNotReported, now},
		},
		{
			name:       "lease stopped",
			conditions: cond(accepted, "True", "HubClusterAdminAccepted") + "," + cond(joined, "True", "ManagedClusterJoined") + "," + cond(available, "Unknown", "ManagedClusterLeaseUpdateStopped"),
			joined:     want{private.True, "ManagedClusterJoined", hubTime},
			avail:      want{private.Unknown, "ManagedClusterLeaseUpdateStopped", hubTime},
		},
		{
			name:       "joined Unknown keeps its reason",
			conditions: cond(accepted, "True", "HubClusterAdminAccepted") + "," + cond(joined, "Unknown", "Joining"),
			joined:     want{private.Unknown, "Joining", hubTime},
			avail:      want{private.Unknown, ReasonNotReported, now},
		},
		{
			name:       "a reason that is not CamelCase becomes the hub condition's type",
			conditions: cond(accepted, "True", "ok") + "," + cond(joined, "False", "lost contact!") + "," + cond(available, "False", ""),
			joined:     want{private.False, joined, hubTime},
			avail:      want{private.False, available, hubTime},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mc := managedCluster(t, "c1", map[string]string{fleet.LabelRegistrationID: "r-1"}, `{"conditions": [`+tt.conditions+`]}`)
			st := registrationStatus(mc, "", now)
			if st.RegistrationId != "r-1" || st.Import != nil {
				t.Errorf("registrationStatus(%s) id, import = %q, %v, want r-1, nil", tt.name, st.RegistrationId, st.Import)
			}
			if len(st.Conditions) != 2 {
				t.Fatalf("registrationStatus(%s): %d conditions, want 2", tt.name, len(st.Conditions))
			}
			for i, w := range []struct {
				typ string
				want
			}{{ConditionJoined, tt.joined}, {ConditionAvailable, tt.avail}} {
				c := st.Conditions[i]
				if c.Type != w.typ || c.Status != w.status || c.Reason != w.reason || !c.LastTransitionTime.Equal(w.at) || c.ObservedGeneration != 0 {
					t.Errorf("registrationStatus(%s).%s = %s %s at %s (gen %d), want %s %s at %s (gen 0)",
						tt.name, w.typ, c.Status, c.Reason, c.LastTransitionTime, c.ObservedGeneration, w.status, w.reason, w.at)
				}
			}
		})
	}
}

func TestImportManifests(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name string
		data map[string]string
		want string
	}{
		{"crds first, then import", map[string]string{"import.yaml": "kind: Namespace\n", "crds.yaml": "kind: CustomResourceDefinition\n"},
			"kind: CustomResourceDefinition\n---\nkind: Namespace\n"},
		{"other keys after, sorted", map[string]string{"zz.yaml": "kind: Z", "import.yaml": "kind: I", "aa.yaml": "kind: A", "crds.yaml": "kind: C"},
			"kind: C\n---\nkind: I\n---\nkind: A\n---\nkind: Z\n"},
		{"empty values skipped", map[string]string{"crds.yaml": "", "import.yaml": "kind: I\n\n"}, "kind: I\n"},
		{"nothing", map[string]string{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := map[string]any{}
			for k, v := range tt.data {
				data[k] = b64(v)
			}
			secret := fromJSON(t, `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c1-import", "namespace": "c1"}}`)
			secret.Object["data"] = data
			got, err := importManifests(secret)
			if err != nil || got != tt.want {
				t.Errorf("importManifests(%v) = %q, %v, want %q", tt.data, got, err, tt.want)
			}
		})
	}
}

func TestStatusHashIgnoresStandInTimes(t *testing.T) {
	t.Parallel()
	mc := managedCluster(t, "c1", map[string]string{fleet.LabelRegistrationID: "r-1"}, "")
	a := statusHash(registrationStatus(mc, "", time.Time{}))
	b := statusHash(registrationStatus(mc, "", time.Time{}))
	if a != b {
		t.Errorf("statusHash of one cluster twice = %s, %s, want equal", a, b)
	}
	if c := statusHash(registrationStatus(mc, "kind: X\n", time.Time{})); c == a {
		t.Errorf("statusHash with import material = without (%s), want different", c)
	}
}
