package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// seedBatchOrgSQL gives an organisation n live registrations.
const seedBatchOrgSQL = `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase)
SELECT gen_random_uuid()::text, ?, 'bench-user', 'seed-' || i, 'eu', 'OCP', 'ready' FROM generate_series(1, ?) i`

// BenchmarkCreateRegistrations registers batches of 1000 (each item with an
// API URL and a token to seal, under an idempotency key) for an organisation
// that already has 100, then 300,000, live registrations, without a quota
// and with one that is never reached. It reports the batches' time:
//
//	go test -run '^$' -bench BenchmarkCreateRegistrations -benchtime 10x ./internal/postgres
func BenchmarkCreateRegistrations(b *testing.B) {
	const size = 1000
	for _, rows := range []int{100, 300_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			_, cfg := pgtest.NewMigratedDatabase(b)
			cfg.StatementTimeout = 0 // the seed is one long statement
			db := pgtest.Open(b, cfg)
			if err := db.Gorm.Exec(seedBatchOrgSQL, "bench-org", rows).Error; err != nil {
				b.Fatal(err)
			}
			if err := db.Gorm.Exec(`VACUUM ANALYZE`).Error; err != nil {
				b.Fatal(err)
			}
			caller := fleet.Identity{OrgID: "bench-org", Username: "bench-user"}
			for _, quota := range []int{0, 10_000_000} {
				b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) {
					cfg := authz.DefaultConfig()
					cfg.Preflight.MaxRegistrationsPerOrg = quota
					a, err := authz.New(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
					if err != nil {
						b.Fatal(err)
					}
					store := postgres.NewStore(db, newBenchKeyring(b), fleet.SystemClock{}, postgres.DefaultStoreConfig(), a)
					for n := 0; b.Loop(); n++ {
						items := make([]fleet.RegistrationCreateItem, size)
						for i := range items {
							items[i] = fleet.RegistrationCreateItem{IdempotencyKey: fmt.Sprintf("q%d-b%d/%d", quota, n, i), Create: fleet.RegistrationCreate{
								Name: fmt.Sprintf("q%d-b%d-%d", quota, n, i), Zone: "eu", Product: fleet.ProductOCP, Labels: map[string]string{"env": "prod"},
								Credentials: &fleet.ImportCredentials{APIURL: "https://api.bench.example.com:6443", Token: "sha256~bench-token"}}}
						}
						results, err := store.CreateRegistrations(context.Background(), caller, items)
						if err != nil {
							b.Fatal(err)
						}
						for i, r := range results {
							if r.Err != nil || !r.Created {
								b.Fatalf("CreateRegistrations() item %d = %v, created %v", i, r.Err, r.Created)
							}
						}
					}
					b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
				})
			}
		})
	}
}

// newBenchKeyring returns a keyring of a fresh random master key.
func newBenchKeyring(b *testing.B) *secrets.Keyring {
	b.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	k, err := secrets.NewKeyring(key)
	if err != nil {
		b.Fatal(err)
	}
	return k
}
