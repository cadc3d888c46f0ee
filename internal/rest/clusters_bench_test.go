package rest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// benchRegistrationsSQL writes 100 registrations of org bench-org placed on
// one hub, as a placed and joined registration looks: 4 labels, its own 3
// conditions and the hub's 2.
const benchRegistrationsSQL = `
INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity) VALUES ('bench-hub', 'bench-hub', 'eu', 'eu-west-1', 'agent', 1000);
INSERT INTO registrations (id, org_id, owner, name, display_name, labels, zone, region, product, hub_id, phase, generation,
	observed_generation, conditions, hub_conditions)
SELECT md5(i::text)::uuid::text, 'bench-org', 'bench-user', 'cluster-' || lpad(i::text, 5, '0'), 'Cluster ' || i,
	jsonb_build_object('env', 'prod', 'team', 'team-' || i % 7, 'tier', 'gold', 'cost-center', 'cc-' || i % 40),
	'eu', 'eu-west-1', 'OCP', 'bench-hub', 'ready', 1, 1,
	'[{"type": "Accepted", "status": "True", "reason": "Validated", "message": "the registration passed validation, quota and access checks", "observed_generation": 1, "last_transition_time": "2026-01-10T08:00:00Z"},
	  {"type": "Placed", "status": "True", "reason": "Placed", "message": "placed on hub bench-hub", "observed_generation": 1, "last_transition_time": "2026-01-10T08:00:01Z"},
	  {"type": "Delivered", "status": "True", "reason": "Applied", "message": "the hub applied the registration", "observed_generation": 1, "last_transition_time": "2026-01-10T08:00:02Z"}]',
	'[{"type": "Joined", "status": "True", "reason": "ManagedClusterJoined", "message": "Managed cluster joined", "observed_generation": 1, "last_transition_time": "2026-01-10T08:05:00Z"},
	  {"type": "Available", "status": "True", "reason": "ManagedClusterAvailable", "message": "Managed cluster is available", "observed_generation": 1, "last_transition_time": "2026-01-10T08:05:00Z"}]'
FROM generate_series(1, 100) AS i`

// BenchmarkClusterPage is the fleet manager's own work for one page of 100
// registrations, `GET {base}/clusters?size=100` as a user of their
// organisation: authentication, the store's round trip on the real
// PostgreSQL, presenting and encoding the answer. It is measured as
// BenchmarkManagedClusterPage is, in process; cpu-ms/op compares the two.
func BenchmarkClusterPage(b *testing.B) {
	benchmarkClusterRead(b, "/clusters?size=100")
}

// BenchmarkClusterGet is BenchmarkClusterPage for one registration by id.
func BenchmarkClusterGet(b *testing.B) {
	benchmarkClusterRead(b, "/clusters/"+"c4ca4238-a0b9-2382-0dcc-509a6f75849b") // md5("1")
}

func benchmarkClusterRead(b *testing.B, path string) {
	e := newStackEnvWith(b, flavours()[0], postgres.DefaultStoreConfig())
	db := pgtest.Open(b, e.dbCfg)
	for _, stmt := range []string{benchRegistrationsSQL} {
		if err := db.Gorm.Exec(stmt).Error; err != nil {
			b.Fatalf("seeding registrations: %v", err)
		}
	}
	handler, token := e.server.Config.Handler, e.userToken(b, "bench-org", "bench-user")
	b.ReportAllocs()
	var size int
	cpu := processCPU(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, e.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s = %d: %s", path, rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}
