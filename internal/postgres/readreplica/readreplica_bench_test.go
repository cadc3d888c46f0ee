package readreplica_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica/readreplicatest"
)

// replicaBenchClusters is the inventory BenchmarkReplicaLoadShed reads:
// REPLICA_BENCH_CLUSTERS, else a size that loads in seconds.
func replicaBenchClusters(b *testing.B) int {
	if v := os.Getenv("REPLICA_BENCH_CLUSTERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("REPLICA_BENCH_CLUSTERS=%q: want a positive number", v)
		}
		return n
	}
	return 5000
}

// serverCPU is the CPU time the processes of a server's sessions (its
// backends and background processes, as pg_stat_activity lists them) have
// used, read from /proc.
func serverCPU(b *testing.B, db *postgres.DB) time.Duration {
	b.Helper()
	var pids []int
	if err := db.Gorm.Raw("SELECT pid FROM pg_stat_activity").Scan(&pids).Error; err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // ended since
		}
		// The fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th of them.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		for _, f := range fields[11:13] {
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// BenchmarkReplicaLoadShed measures the CPU the primary and a streaming
// standby spend on the inventory's heavy reads (an administrator's page, a
// search the counters do not answer, and the change feed read from its
// start in full pages), with every read on the primary and with the read
// replica. It reports each server's CPU per read: what the replica takes off
// the primary. docs/performance.md has the command and its figures.
func BenchmarkReplicaLoadShed(b *testing.B) {
	e := newReplicaBenchEnv(b)
	ctx := context.Background()
	admin := fleet.Identity{OrgID: "ops"}
	reads := []func(store *postgres.Store) error{
		func(store *postgres.Store) error {
			_, err := store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Size: 100})
			return err
		},
		func(store *postgres.Store) error {
			_, err := store.ListManagedClusters(ctx, admin, true, fleet.ListQuery{Size: 100, Search: "openshift_version = '4.16' and name like 'c%'"})
			return err
		},
		func(store *postgres.Store) error {
			cursor := ""
			for {
				page, err := store.ListManagedClusterChanges(ctx, admin, true, cursor, 500)
				if err != nil || len(page.Items) < 500 {
					return err
				}
				cursor = page.Cursor
			}
		},
	}
	for _, tc := range []struct {
		name  string
		store *postgres.Store
	}{{"primary", e.Direct}, {"replica", e.Store}} {
		b.Run(tc.name, func(b *testing.B) {
			for _, read := range reads { // warm: every pool connection open, caches filled
				if err := read(tc.store); err != nil {
					b.Fatal(err)
				}
			}
			primaryBefore, standbyBefore := serverCPU(b, e.DB), serverCPU(b, e.standbyDB)
			b.ResetTimer()
			for i := range b.N {
				if err := reads[i%len(reads)](tc.store); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((serverCPU(b, e.DB)-primaryBefore).Microseconds())/float64(b.N), "primary-cpu-µs/op")
			b.ReportMetric(float64((serverCPU(b, e.standbyDB)-standbyBefore).Microseconds())/float64(b.N), "standby-cpu-µs/op")
		})
	}
}

// replicaBenchEnv is a readreplicatest.Env for a benchmark, its inventory
// loaded and replayed on the standby.
type replicaBenchEnv struct {
	*readreplicatest.Env
	standbyDB *postgres.DB
}

func newReplicaBenchEnv(b *testing.B) *replicaBenchEnv {
	b.Helper()
	e := readreplicatest.New(b, 5*time.Second, authz.MustDefault())
	n := replicaBenchClusters(b)
	for e.Ingested < n {
		e.Ingest(min(500, n-e.Ingested))
	}
	cfg := e.Standby.Config()
	cfg.Name = e.DBName
	standby := pgtest.Open(b, cfg)
	gomega.NewWithT(b).Eventually(func(g gomega.Gomega) {
		var count int64
		g.Expect(standby.Gorm.Raw("SELECT count(*) FROM managed_clusters").Scan(&count).Error).To(gomega.Succeed())
		g.Expect(count).To(gomega.Equal(int64(n)), "clusters on the standby")
		d, known := e.Replica.Staleness()
		g.Expect(known && d < e.Bound).To(gomega.BeTrue(), "the replica is fresh")
	}).WithTimeout(5 * time.Minute).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	return &replicaBenchEnv{Env: e, standbyDB: standby}
}
