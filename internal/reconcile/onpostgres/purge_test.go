package onpostgres_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
)

// purgeClock is a clock stopped at one instant.
type purgeClock time.Time

func (c purgeClock) Now() time.Time { return time.Time(c) }

func TestTombstonePurgeHonoursTheRetention(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newEnv(t)
	ctx := context.Background()
	hub, err := e.store.CreateHub(ctx, fleet.HubCreate{Name: "hub-purge", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "agent-purge"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var upserts []fleet.ManagedClusterSummary
	for _, n := range []string{"old-1", "old-2", "old-3", "young-1", "young-2", "live"} {
		upserts = append(upserts, fleet.ManagedClusterSummary{Name: n})
	}
	_, err = e.store.IngestInventory(ctx, hub.ID, "agent-purge", fleet.InventoryBatch{Upserts: upserts,
		Deletes: []string{"old-1", "old-2", "old-3", "young-1", "young-2"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	db := pgtest.Open(t, e.cfg)
	g.Expect(db.Gorm.Exec(`UPDATE managed_clusters SET deleted_at = CASE WHEN name LIKE 'old-%' THEN '2026-01-01T00:00:00Z'::timestamptz
	ELSE '2026-01-06T00:00:00Z'::timestamptz END WHERE deleted_at IS NOT NULL`).Error).To(gomega.Succeed())

	cfg := defaultReconcileConfig()
	cfg.TombstoneRetention, cfg.TombstonePurgeBatch = 7*24*time.Hour, 2
	reg := prometheus.NewRegistry()
	metrics, err := reconcile.NewMetrics("test", reg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	now := purgeClock(time.Date(2026, 1, 9, 0, 0, 0, 0, time.UTC)) // the old tombstones are 8 days old, the young 3
	purge := reconcile.NewTombstonePurge(cfg, e.store, postgres.TombstoneTables(), now, slog.New(slog.DiscardHandler), metrics)

	// The purge takes a tombstone once every older transaction of the
	// database has ended, so a first pass may find fewer.
	purged := 0
	g.Eventually(func() (int, error) {
		n, full, err := purge.PurgeTable(ctx, "managed_clusters")
		purged += n
		if full {
			t.Errorf("PurgeTable() reported a full last batch with %d purged", n)
		}
		return purged, err
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(3), "PurgeTable(managed_clusters)")

	var left []string
	g.Expect(db.Gorm.Raw(`SELECT name FROM managed_clusters ORDER BY name`).Scan(&left).Error).To(gomega.Succeed())
	g.Expect(left).To(gomega.Equal([]string{"live", "young-1", "young-2"}))
	g.Expect(purgedMetric(t, reg)).To(gomega.Equal(3.0))
}

// purgedMetric reads the tombstones-purged counter of managed_clusters.
func purgedMetric(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "test_inventory_tombstones_purged_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == "managed_clusters" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
