// Package readreplicatest runs a read replica for tests: a test-owned
// primary with a migrated database, a streaming standby of it made with
// pg_basebackup -R, a readreplica.Replica sampling both, and two stores on
// the primary, one reading through the replica and one without (the
// reference). The tests of readreplica and those of the store's reads on a
// standby share it.
package readreplicatest

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// Env is a primary with a migrated database, a streaming standby of it, the
// replica on them and two stores on the primary: Store reads through the
// replica, Direct does not. The replica's metrics are registered in Reg
// with the namespace "fm".
type Env struct {
	t       testing.TB
	Primary *pgtest.Server
	Standby *pgtest.Server
	// DB is the primary's pool on the database DBName.
	DB      *postgres.DB
	DBName  string
	Reg     *prometheus.Registry
	Replica *readreplica.Replica
	Store   *postgres.Store
	Direct  *postgres.Store
	// Hub is the agent hub "agent-1" reports the inventory of.
	Hub fleet.Hub
	// Bound is the replica's --db-read-max-staleness.
	Bound time.Duration
	// Ingested is how many clusters Ingest has added.
	Ingested int
}

// ShortBound is a test's --db-read-max-staleness: short, so that the switch
// to the primary is seen quickly, yet well above the check interval.
const ShortBound = 2 * time.Second

// New starts the primary and the standby and runs the replica, with the
// staleness bound bound, until t ends. The stores decide with authorizer
// (authz.MustDefault(), which this package may not import: it is another
// adapter's).
func New(t testing.TB, bound time.Duration, authorizer fleet.Authorizer) *Env {
	t.Helper()
	ctx := context.Background()
	e := &Env{t: t, DBName: "fleet_replica", Reg: prometheus.NewRegistry(), Bound: bound}
	e.Primary = pgtest.StartServer(t)
	cfg := e.Primary.NewDatabase(t, e.DBName)
	db := pgtest.Open(t, cfg)
	e.DB = db
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate(): %v", err)
	}
	e.Standby = pgtest.StartServerWith(t, pgtest.ServerOptions{
		Init: func(s *pgtest.Server, dir string) error {
			out, err := s.Command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(e.Primary.Port()), "-U", "postgres",
				"-D", dir, "-R", "-X", "stream", "-c", "fast").CombinedOutput()
			if err != nil {
				return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
			}
			return nil
		},
		// A long read on the standby is not cancelled by the replay of a
		// vacuum on the primary.
		Settings: []string{"hot_standby_feedback=on"},
	})
	var err error
	e.Replica, err = readreplica.New(readreplica.Config{Host: "127.0.0.1", Port: e.Standby.Port(), MaxStaleness: e.Bound,
		CheckInterval: 100 * time.Millisecond}, cfg, db, fleet.SystemClock{}, slog.New(slog.DiscardHandler), "fm", e.Reg)
	if err != nil {
		t.Fatalf("readreplica.New(): %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.Replica.Run(runCtx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); _ = e.Replica.Close() })

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyring, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	e.Direct = postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authorizer)
	e.Store = e.Direct.WithReplica(e.Replica)
	e.Hub, err = e.Direct.CreateHub(ctx, fleet.HubCreate{Name: "hub-1", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// cluster is a managed cluster of version as an agent reports it.
func cluster(name, version string) fleet.ManagedClusterSummary {
	return fleet.ManagedClusterSummary{
		Name: name, UID: "uid-" + name, ResourceVersion: "1",
		Labels:      map[string]string{"env": "prod"},
		Claims:      map[string]string{fleet.ClaimID: "id-" + name, fleet.ClaimVersion: version, fleet.ClaimPlatform: "AWS", fleet.ClaimRegion: "eu-west-1"},
		Capacity:    map[string]string{"cpu": "16", "memory": "64Gi", "core_worker": "12", "socket_worker": "2"},
		Allocatable: map[string]string{"cpu": "15", "memory": "60Gi"},
		Conditions: []fleet.ClusterCondition{
			{Type: fleet.HubConditionAccepted, Status: "True"}, {Type: fleet.HubConditionJoined, Status: "True"},
			{Type: fleet.HubConditionAvailable, Status: "True"},
		},
		KubernetesVersion: "v1.31.4",
	}
}

// Ingest adds n new clusters to the inventory, one batch.
func (e *Env) Ingest(n int) {
	e.t.Helper()
	var b fleet.InventoryBatch
	for range n {
		b.Upserts = append(b.Upserts, cluster(fmt.Sprintf("c%03d", e.Ingested), "4.16"))
		e.Ingested++
	}
	if _, err := e.Direct.IngestInventory(context.Background(), e.Hub.ID, "agent-1", b); err != nil {
		e.t.Fatalf("IngestInventory(): %v", err)
	}
}

// StandbyDB opens a pool on the standby's copy of the database.
func (e *Env) StandbyDB() *postgres.DB {
	e.t.Helper()
	cfg := e.Standby.Config()
	cfg.Name = e.DBName
	return pgtest.Open(e.t, cfg)
}

// StandbySQL runs a statement on the standby's copy of the database.
func (e *Env) StandbySQL(sql string) {
	e.t.Helper()
	db := e.StandbyDB()
	defer db.Close()
	if err := db.Gorm.Exec(sql).Error; err != nil {
		e.t.Fatalf("standby: %s: %v", sql, err)
	}
}

// Counter is the value of the counter name with labels, 0 when absent.
func (e *Env) Counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	families, err := e.Reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// Reads is the count of the heavy reads of kind read served by target
// (primary, replica).
func (e *Env) Reads(read, target string) float64 {
	return e.Counter("fm_db_reads_total", map[string]string{"read": read, "target": target})
}

// List reads the whole inventory as an administrator.
func (e *Env) List() int {
	e.t.Helper()
	page, err := e.Store.ListManagedClusters(context.Background(), fleet.Identity{OrgID: "ops"}, true, fleet.ListQuery{Size: 500})
	if err != nil {
		e.t.Fatalf("ListManagedClusters(): %v", err)
	}
	return len(page.Items)
}

// ReplicaAnswers waits until the standby answers a list with n clusters.
func (e *Env) ReplicaAnswers(n int) {
	e.t.Helper()
	gomega.NewWithT(e.t).Eventually(func(g gomega.Gomega) {
		// One read at a time: the counter moves by this read only.
		before := e.Reads("inventory_list", "replica")
		g.Expect(e.List()).To(gomega.Equal(n))
		g.Expect(e.Reads("inventory_list", "replica")).To(gomega.BeNumerically(">", before), "a list read served by the standby")
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(gomega.Succeed())
}
