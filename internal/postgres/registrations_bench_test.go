package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// benchCreateConcurrency is how many creates of one organisation run at once.
const benchCreateConcurrency = 8

// seedOrgRegistrationsSQL gives an organisation n registrations, shaped as
// fleet-bench's (cmd/fleet-bench/readorg.go): placed rows with the columns a
// create leaves to their defaults.
const seedOrgRegistrationsSQL = `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase)
SELECT gen_random_uuid()::text, ?, 'bench-user', 'seed-' || i, 'eu', 'OCP', 'ready' FROM generate_series(1, ?) i`

// BenchmarkCreateRegistration runs CreateRegistration at a concurrency of 8
// from one organisation that already has 100, then 300,000, live
// registrations, without a quota and with one that is never reached. It
// reports creates per second and the median and 99th percentile latency:
//
//	go test -run '^$' -bench 'BenchmarkCreateRegistration$' -benchtime 2000x ./internal/postgres
func BenchmarkCreateRegistration(b *testing.B) {
	for _, rows := range []int{100, 300_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			_, cfg := pgtest.NewMigratedDatabase(b)
			cfg.MaxOpenConns, cfg.MaxIdleConns = 2*benchCreateConcurrency, 2*benchCreateConcurrency
			cfg.StatementTimeout = 0 // the seed and its VACUUM take longer than a request may
			db := pgtest.Open(b, cfg)
			if err := db.Gorm.Exec(seedOrgRegistrationsSQL, "bench-org", rows).Error; err != nil {
				b.Fatal(err)
			}
			if err := db.Gorm.Exec(`VACUUM ANALYZE`).Error; err != nil {
				b.Fatal(err)
			}
			for _, quota := range []int{0, 10_000_000} {
				b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) {
					cfg := authz.DefaultConfig()
					cfg.Preflight.MaxRegistrationsPerOrg = quota
					a, err := authz.New(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
					if err != nil {
						b.Fatal(err)
					}
					store := postgres.NewStore(db, nil, fleet.SystemClock{}, postgres.DefaultStoreConfig(), a)
					benchCreates(b, store, fmt.Sprintf("q%d", quota))
				})
			}
		})
	}
}

// benchCreates runs b.N creates, benchCreateConcurrency at a time, named
// prefix-<n>, and reports their rate and latencies.
func benchCreates(b *testing.B, store *postgres.Store, prefix string) {
	caller := fleet.Identity{OrgID: "bench-org", Username: "bench-user"}
	var next atomic.Int64
	latencies := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range benchCreateConcurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				began := time.Now()
				create := fleet.RegistrationCreate{Name: fmt.Sprintf("%s-%d-%d", prefix, b.N, i), Zone: "eu", Product: fleet.ProductOCP}
				if _, _, err := store.CreateRegistration(context.Background(), caller, create, fmt.Sprintf("%s-%d-%d", prefix, b.N, i)); err != nil {
					b.Error(err)
					return
				}
				latencies[i] = time.Since(began)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
