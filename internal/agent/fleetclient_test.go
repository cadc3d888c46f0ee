package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// newTestFleetClient returns a client of f authenticating with a token file
// (returned, to rotate it).
func newTestFleetClient(t *testing.T, f *fakeFleet, cfg Config) (*FleetClient, string) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(fakeToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.TokenFile = tokenFile
	fc, err := NewFleetClient(f.URL(), f.hubID, NewHTTPClient(cfg, NewTokenSource(cfg, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return fc, tokenFile
}

func TestWaitParam(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{30 * time.Second: "30s", 90 * time.Second: "90s", 1500 * time.Millisecond: "1500ms"} {
		if got := waitParam(d); got != want {
			t.Errorf("waitParam(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestFleetClientDesiredLongPoll(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	fc, _ := newTestFleetClient(t, f, DefaultConfig())
	ctx := t.Context()

	rev := f.setDesired(private.DesiredRegistration{RegistrationId: "r-1", ManagedClusterName: "c1", Generation: 1,
		Objects: rawObjects(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "c1"}})})
	set, err := fc.GetHubDesired(ctx, 0, 0, time.Second)
	if err != nil || set == nil || set.Revision != rev || len(set.Registrations) != 1 {
		t.Fatalf("GetHubDesired(after=0) = %+v, %v, want revision %d with 1 registration", set, err, rev)
	}
	// Nothing newer: 304 after the wait.
	start := time.Now()
	set, err = fc.GetHubDesired(ctx, rev, 0, 300*time.Millisecond)
	if err != nil || set != nil {
		t.Fatalf("GetHubDesired(after=%d) = %+v, %v, want nil, nil (304)", rev, set, err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("GetHubDesired(after=%d) answered after %s, want after the wait", rev, time.Since(start))
	}
	// A change during the wait answers at once.
	waited := f.nextWait()
	go func() {
		<-waited
		f.setDesired()
	}()
	set, err = fc.GetHubDesired(ctx, rev, 0, 10*time.Second)
	if err != nil || set == nil || set.Revision != rev+1 {
		t.Fatalf("GetHubDesired(after=%d) with a change = %+v, %v, want revision %d", rev, set, err, rev+1)
	}
}

func TestFleetClientErrorsAndTokenRotation(t *testing.T) {
	t.Parallel()
	f := newFakeFleet(t)
	fc, tokenFile := newTestFleetClient(t, f, DefaultConfig())
	ctx := t.Context()
	report := private.HubStatusReport{AgentVersion: "test", AgentStartGeneration: 1}

	f.failNext("putHubStatus", 1)
	_, err := fc.PutHubStatus(ctx, report)
	if se, ok := err.(*StatusError); !ok || se.Status != 500 || se.Code != "FAKE-500" || permanent(err) {
		t.Errorf("PutHubStatus with a 500 = %v, want a retryable StatusError 500 FAKE-500", err)
	}
	if _, err := fc.PutHubStatus(ctx, report); err != nil {
		t.Errorf("PutHubStatus = %v, want nil", err)
	}

	// A rotated token file is used from the next request on.
	if err := os.WriteFile(tokenFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = fc.PutHubStatus(ctx, report)
	if se, ok := err.(*StatusError); !ok || se.Status != 401 || permanent(err) {
		t.Errorf("PutHubStatus with a token the fleet manager refuses = %v, want a retryable 401", err)
	}
	if tokens := f.seenTokens(); tokens[len(tokens)-1] != "rotated" {
		t.Errorf("last token sent = %q, want the rotated one", tokens[len(tokens)-1])
	}

	other, err := NewFleetClient(f.URL(), "other-hub", NewHTTPClient(DefaultConfig(), NewTokenSource(Config{TokenFile: tokenFile}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(fakeToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := other.PostHubInventory(ctx, private.InventoryBatch{Upserts: []private.ManagedClusterSummary{}, Deletes: []string{}}); err == nil {
		t.Errorf("PostHubInventory(other-hub) = nil, want 404")
	} else if se, ok := err.(*StatusError); !ok || se.Status != 404 {
		t.Errorf("PostHubInventory(other-hub) = %v, want 404", err)
	}
	if !slices.Contains(f.seenTokens(), fakeToken) {
		t.Errorf("tokens sent = %v, want %q among them", f.seenTokens(), fakeToken)
	}
}
