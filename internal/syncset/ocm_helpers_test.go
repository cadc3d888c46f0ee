package syncset_test

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/ocmtest"
)

const (
	ocmClusterID = "2h9luc0gq0ndb59258q77lr1pmon1j4j"
	ocmClient    = "fleet-manager-sa"
	ocmSecret    = "s3cret"
)

// ocmSource is an in-memory syncset.Source: a hub's credentials and the
// objects fleet.DesiredObjects renders for a registration.
type ocmSource struct {
	mu    sync.Mutex
	creds map[string]string
}

func (s *ocmSource) setCredentials(creds map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creds = maps.Clone(creds)
}

func (s *ocmSource) HubCredentials(_ context.Context, _ string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.creds), nil
}

func (s *ocmSource) RegistrationObjects(_ context.Context, hubID string, reg fleet.Registration) ([]map[string]any, error) {
	return fleet.DesiredObjects(reg, hubID, &fleet.ImportCredentials{APIURL: "https://api.spoke.example.com:6443", Token: "import-token"}), nil
}

// ocmEnv is a fake OCM, a delivery talking to it and a registration to
// deliver to a syncset-ocm hub.
type ocmEnv struct {
	srv     *ocmtest.Server
	src     *ocmSource
	metrics *prometheus.Registry
	d       *syncset.OCMDelivery
	hub     fleet.Hub
	reg     fleet.Registration
}

// newOCMEnv starts a fake OCM knowing one cluster and one OAuth client, and a
// delivery using that client; cfg adjusts the delivery's configuration.
func newOCMEnv(t *testing.T, cfg func(*syncset.OCMConfig)) *ocmEnv {
	t.Helper()
	e := &ocmEnv{srv: ocmtest.New(t), src: &ocmSource{}, metrics: prometheus.NewRegistry()}
	e.srv.AddCluster(ocmClusterID)
	e.srv.AddClient(ocmClient, ocmSecret)
	e.src.setCredentials(map[string]string{fleet.CredentialOCMClientID: ocmClient, fleet.CredentialOCMClientSecret: ocmSecret})
	m, err := syncset.NewMetrics("fleet_manager", e.metrics)
	if err != nil {
		t.Fatalf("NewMetrics() = %v", err)
	}
	c := syncset.DefaultOCMConfig()
	c.TokenURL = e.srv.TokenURL()
	if cfg != nil {
		cfg(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("OCMConfig.Validate() = %v", err)
	}
	e.d = syncset.NewOCMDelivery(c, e.src, m, nil)
	t.Cleanup(func() {
		if err := e.d.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	e.hub = fleet.Hub{ID: "hub-ocm-1", Name: "hub-ocm-1", DeliveryMode: fleet.DeliverySyncSetOCM,
		OCM: &fleet.OCMTarget{ClusterID: ocmClusterID, APIURL: e.srv.URL()}}
	e.reg = fleet.Registration{ID: "0b9c2f5e-8a51-4c3e-9d55-2f1e7d4b6a10", OrgID: "org-1", Name: "prod-eu-1",
		Labels: map[string]string{"env": "prod"}}
	return e
}

func (e *ocmEnv) id() string   { return fleet.OCMSyncSetID(e.reg) }
func (e *ocmEnv) path() string { return ocmtest.SyncSetPath(ocmClusterID, e.id()) }

// legacyID is the id earlier releases gave the SyncSet; delLegacy deletes it.
func (e *ocmEnv) legacyID() string { return fleet.LegacyOCMSyncSetID(e.reg) }
func (e *ocmEnv) delLegacy(status int) ocmtest.Call {
	return ocmtest.Call{Method: "DELETE", Path: ocmtest.SyncSetPath(ocmClusterID, e.legacyID()), Status: status}
}

// Calls the fake OCM answers, as tests expect them.
func (e *ocmEnv) get(status int) ocmtest.Call {
	return ocmtest.Call{Method: "GET", Path: e.path(), Status: status}
}
func (e *ocmEnv) patch(status int) ocmtest.Call {
	return ocmtest.Call{Method: "PATCH", Path: e.path(), Status: status}
}
func (e *ocmEnv) del(status int) ocmtest.Call {
	return ocmtest.Call{Method: "DELETE", Path: e.path(), Status: status}
}
func (e *ocmEnv) post(status int) ocmtest.Call {
	return ocmtest.Call{Method: "POST", Path: ocmtest.SyncSetsPath(ocmClusterID), Status: status}
}
func ocmToken(grant string, status int) ocmtest.Call {
	return ocmtest.Call{Method: "POST", Path: ocmtest.TokenPath, Status: status, Grant: grant}
}

// deliver runs Deliver and expects it done.
func (e *ocmEnv) deliver(t *testing.T) fleet.DeliveryReport {
	t.Helper()
	report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
	if err != nil || !report.Done {
		t.Fatalf("Deliver(%s) = %+v, %v; want done", e.reg.ID, report, err)
	}
	return report
}

// wantResources is what the SyncSet should hold: the rendered objects as JSON.
func (e *ocmEnv) wantResources(t *testing.T) []any {
	t.Helper()
	objects, _ := e.src.RegistrationObjects(context.Background(), e.hub.ID, e.reg)
	g := gomega.NewWithT(t)
	var want []any
	for _, o := range objects {
		want = append(want, ocmJSON(g, o))
	}
	return want
}

// ocmJSON is v as JSON decodes it.
func ocmJSON(g *gomega.WithT, v any) any {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var out any
	g.Expect(json.Unmarshal(b, &out)).To(gomega.Succeed())
	return out
}

// ocmCount counts the calls whose "METHOD" or "METHOD PATH" is what.
func ocmCount(calls []ocmtest.Call, what string) int {
	n := 0
	for _, c := range calls {
		if c.Method == what || c.Method+" "+c.Path == what {
			n++
		}
	}
	return n
}

// ocmApplies reads the apply histogram's sample counts by outcome.
func ocmApplies(g *gomega.WithT, reg *prometheus.Registry) map[string]uint64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	counts := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "fleet_manager_syncset_apply_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					counts[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return counts
}
