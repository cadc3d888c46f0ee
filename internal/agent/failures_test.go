package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// rawObjects encodes objects as a desired set's entry carries them.
func rawObjects(t testing.TB, objects ...map[string]any) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, 0, len(objects))
	for _, o := range objects {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// editObject decodes an entry's object, lets edit change it, and encodes it again.
func editObject(t testing.TB, raw json.RawMessage, edit func(map[string]any)) json.RawMessage {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	edit(o)
	return rawObjects(t, o)[0]
}

// kindOf returns the kind of an entry's object.
func kindOf(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var o struct{ Kind string }
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return o.Kind
}

// applyAll applies set and returns what failed, the entries and the pass,
// as one error: nil when the whole set is on the hub.
func applyAll(ctx context.Context, a *applier, set *private.DesiredSet) error {
	failures, err := a.applySet(ctx, set)
	errs := []error{err}
	for _, f := range failures {
		errs = append(errs, fmt.Errorf("%s%s: %s: %s", ptrValue(f.RegistrationId), ptrValue(f.PolicyId), f.Reason, f.Message))
	}
	return errors.Join(errs...)
}

// lastFailures returns the failures of the last heartbeat the fake fleet
// manager received, and whether it carried any list.
func lastFailures(f *fakeFleet) ([]private.EntryFailure, bool) {
	hbs := f.heartbeats()
	if len(hbs) == 0 || hbs[len(hbs)-1].Failures == nil {
		return nil, false
	}
	return *hbs[len(hbs)-1].Failures, true
}

// TestRunDesiredRetriesFailedEntries: a registration whose Secret goes into
// a namespace the hub does not have fails alone. The revision is
// acknowledged at once and the heartbeat names the failure with the hub's
// reason; once the namespace exists, the agent's retry applies the entry and
// the next heartbeat reports no failure.
func TestRunDesiredRetriesFailedEntries(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	f := newFakeFleetFor(t, uniqueHubID("hub-retry"))
	a := runAgentOnHub(t, f)
	suffix := fmt.Sprintf("%x", time.Now().UnixNano())
	own := func(id string) map[string]any {
		return map[string]any{fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelHubID: f.hubID, fleet.LabelRegistrationID: id}
	}
	good := private.DesiredRegistration{RegistrationId: "r-good-" + suffix, Generation: 1, Objects: rawObjects(t,
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "good-" + suffix, "labels": own("r-good-" + suffix)}})}
	lateNS := "later-" + suffix
	late := private.DesiredRegistration{RegistrationId: "r-late-" + suffix, Generation: 1, Objects: rawObjects(t,
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": lateNS, "labels": own("r-late-" + suffix)},
			"stringData": map[string]any{"k": "v"}})}
	rev := f.setDesired(good, late)

	g.Eventually(f.appliedRevision).WithTimeout(30*time.Second).Should(gomega.Equal(rev), "the revision is acknowledged despite the failed entry")
	g.Eventually(func() []private.EntryFailure { l, _ := lastFailures(f); return l }).WithTimeout(30 * time.Second).Should(gomega.HaveExactElements(
		gomega.And(gomega.HaveField("RegistrationId", gomega.HaveValue(gomega.Equal(late.RegistrationId))), gomega.HaveField("Reason", "NotFound"),
			gomega.HaveField("Message", gomega.ContainSubstring(lateNS)))))
	g.Expect(testutil.ToFloat64(a.metrics.failedEntries)).To(gomega.Equal(1.0), "fleetshard_sync_desired_failed_entries")

	// The next revision comes as a delta from the acknowledged one, holding
	// only the new entry; the failure of the entry it did not touch is
	// still reported with it.
	more := private.DesiredRegistration{RegistrationId: "r-more-" + suffix, Generation: 1, Objects: rawObjects(t,
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "more-" + suffix, "labels": own("r-more-" + suffix)}})}
	rev2 := f.setDesired(good, late, more)
	g.Eventually(func() []any {
		hbs := f.heartbeats()
		l, _ := lastFailures(f)
		ids := []string{}
		for _, e := range l {
			ids = append(ids, ptrValue(e.RegistrationId))
		}
		return []any{hbs[len(hbs)-1].AppliedRevision, ids}
	}).WithTimeout(30*time.Second).Should(gomega.Equal([]any{rev2, []string{late.RegistrationId}}), "the failure carried over the delta")
	g.Expect(f.desiredSinces()).To(gomega.ContainElement(rev), "the agent asked for the changes since the revision it held")

	admin := hubtest.Start(t).NewDynamicFor(t)
	if _, err := admin.Resource(namespaceGVR).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": lateNS}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() any {
		l, ok := lastFailures(f)
		return []any{len(l), ok}
	}).WithTimeout(60*time.Second).Should(gomega.Equal([]any{0, true}), "the retried entry applied: no failure left")
	g.Expect(testutil.ToFloat64(a.metrics.failedEntries)).To(gomega.Equal(0.0), "fleetshard_sync_desired_failed_entries")
	if _, err := get(t.Context(), admin, secretGVR, lateNS, "s"); err != nil {
		t.Errorf("Secret %s/s after the retry: %v", lateNS, err)
	}
}

// TestHeartbeatToAFleetManagerWithoutFailures: a fleet manager older than
// the heartbeat's failures refuses them; the agent sends the heartbeat
// again without them, so its hub stays ready and its revision acknowledged.
func TestHeartbeatToAFleetManagerWithoutFailures(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	f.refuseFailures = true
	a := newTestAgent(t, f, newFakeHub(), DefaultConfig(), &fixedClock{t: time.Now()})
	rev := f.setDesired()
	a.applied.Store(rev)
	a.lastPass.record(rev, nil, []private.EntryFailure{{PolicyId: ptr("p-1"), Reason: "Invalid", Message: "refused"}}, time.Now())
	a.heartbeat(t.Context())
	hbs := f.heartbeats()
	if len(hbs) != 1 || hbs[0].Failures != nil || hbs[0].AppliedRevision != rev {
		t.Fatalf("heartbeats = %+v, want one acknowledging revision %d without failures", hbs, rev)
	}
	if got := f.appliedRevision(); got != rev {
		t.Errorf("applied revision = %d, want %d", got, rev)
	}
}
