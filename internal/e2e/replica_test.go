package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// replicaStandby starts a streaming standby of primary, made by
// pg_basebackup -R, and returns it.
func replicaStandby(t *testing.T, primary *pgtest.Server) *pgtest.Server {
	t.Helper()
	return pgtest.StartServerWith(t, pgtest.ServerOptions{
		Init: func(s *pgtest.Server, dir string) error {
			out, err := s.Command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port()), "-U", "postgres",
				"-D", dir, "-R", "-X", "stream", "-c", "fast").CombinedOutput()
			if err != nil {
				return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
			}
			return nil
		},
		Settings: []string{"hot_standby_feedback=on"},
	})
}

// replicaExec runs a statement on db (a standby's maintenance database).
func replicaExec(t *testing.T, cfg postgres.Config, sql string) {
	t.Helper()
	db := pgtest.Open(t, cfg)
	defer db.Close()
	if err := db.Gorm.Exec(sql).Error; err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// replicaMetric scrapes the fleet manager's metrics and returns the sample
// of name whose labels include every one of labels (0 when none).
func replicaMetric(t *testing.T, fm *fleetManager, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", fm.metrics))
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
samples:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue samples
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return 0
}

// TestReadReplicaThroughTheBinary runs fleet-manager serve with
// --db-read-replica-host on a real streaming standby: the API's list and
// change feed are answered by it while fresh, by the primary with the new
// clusters once its paused replay passes the bound, and by it again after
// the replay resumes; a follower of the feed through the API sees every
// change once, in order.
func TestReadReplicaThroughTheBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := gomega.NewWithT(t)
	primary := pgtest.StartServer(t)
	dbCfg := primary.NewDatabase(t, "fleet")
	standby := replicaStandby(t, primary)
	fm := startFleetManagerOn(t, hydratest.Start(t), dbCfg, "--db-read-replica-host=127.0.0.1",
		"--db-read-replica-port="+strconv.Itoa(standby.Port()), "--db-read-max-staleness=2s", "--db-read-replica-check-interval=100ms")
	sre := fm.token("sre", "bob", "fleet-admin")

	resp, err := fm.Admin.CreateHubWithResponse(ctx, admin.HubCreate{Name: "replica-hub", Zone: "eu", Region: "eu-west-1",
		DeliveryMode: admin.Agent, Capacity: 1000, AgentIdentity: ptr("replica-agent")}, bearer(sre))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateHub() = %v %s, %v", resp.StatusCode(), resp.Body, err)
	}
	// The agent's report, written as the agent's POST .../inventory writes it.
	db := pgtest.Open(t, dbCfg)
	store := postgres.NewStore(db, nil, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	ingested := 0
	ingest := func(n int) {
		t.Helper()
		var b fleet.InventoryBatch
		for range n {
			name := fmt.Sprintf("c%03d", ingested)
			b.Upserts = append(b.Upserts, fleet.ManagedClusterSummary{Name: name, UID: "uid-" + name, ResourceVersion: "1",
				Claims: map[string]string{fleet.ClaimID: "id-" + name, fleet.ClaimVersion: "4.16"}})
			ingested++
		}
		if _, err := store.IngestInventory(ctx, resp.JSON201.Id, "replica-agent", b); err != nil {
			t.Fatalf("IngestInventory(): %v", err)
		}
	}
	list := func() int {
		t.Helper()
		got, err := fm.Public.ListManagedClustersWithResponse(ctx, &public.ListManagedClustersParams{Size: ptr(500)}, bearer(sre))
		if err != nil || got.JSON200 == nil {
			t.Fatalf("ListManagedClusters() = %v %s, %v", got.StatusCode(), got.Body, err)
		}
		return got.JSON200.Total
	}
	var seen []string
	cursor := ""
	follow := func(n int) {
		t.Helper()
		g.Eventually(func() int {
			for {
				got, err := fm.Public.ListManagedClusterChangesWithResponse(ctx,
					&public.ListManagedClusterChangesParams{After: &cursor, Size: ptr(5)}, bearer(sre))
				if err != nil || got.JSON200 == nil {
					t.Fatalf("ListManagedClusterChanges() = %v %s, %v", got.StatusCode(), got.Body, err)
				}
				cursor = got.JSON200.Cursor
				if len(got.JSON200.Items) == 0 {
					return len(seen)
				}
				for _, it := range got.JSON200.Items {
					seen = append(seen, it.Cluster.Name)
				}
			}
		}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(gomega.BeNumerically(">=", n), "changes followed")
	}
	reads := func(read, target string) float64 {
		return replicaMetric(t, fm, "fleet_manager_db_reads_total", `read="`+read+`"`, `target="`+target+`"`)
	}

	replicaAnswers := func(n int) {
		t.Helper()
		g.Eventually(func(g gomega.Gomega) {
			// One read at a time: the counter moves by this read only.
			before := reads("inventory_list", "replica")
			g.Expect(list()).To(gomega.Equal(n))
			g.Expect(reads("inventory_list", "replica")).To(gomega.BeNumerically(">", before), "a list read served by the standby")
		}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(gomega.Succeed(),
			func() string { return "the standby never answered; log:\n" + fm.Logs() })
	}

	ingest(30)
	replicaAnswers(30)
	follow(30)
	g.Expect(reads("inventory_feed", "replica")).To(gomega.BeNumerically(">", 0), "feed pages served by the standby")

	standbyCfg := standby.Config()
	replicaExec(t, standbyCfg, "SELECT pg_wal_replay_pause()")
	ingest(10)
	wrote := time.Now()
	primaryBefore := reads("inventory_list", "primary")
	g.Eventually(func() int {
		start, n := time.Now(), list()
		if since := start.Sub(wrote); since > 2*time.Second && n != 40 {
			t.Errorf("GET /managed_clusters %s after the write, past the bound = %d clusters, want 40", since, n)
		}
		return n
	}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Equal(40))
	g.Expect(reads("inventory_list", "primary")).To(gomega.BeNumerically(">", primaryBefore))
	g.Expect(replicaMetric(t, fm, "fleet_manager_db_replica_staleness_seconds")).To(gomega.BeNumerically(">", 2))
	follow(40)

	replicaExec(t, standbyCfg, "SELECT pg_wal_replay_resume()")
	ingest(10)
	feedBefore := reads("inventory_feed", "replica")
	replicaAnswers(50)
	follow(50)
	g.Expect(reads("inventory_feed", "replica")).To(gomega.BeNumerically(">", feedBefore), "feed pages served by the standby again")

	want := make([]string, 0, ingested)
	ref, err := store.ListManagedClusterChanges(ctx, fleet.Identity{OrgID: "sre"}, true, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range ref.Items {
		want = append(want, it.Cluster.Name)
	}
	g.Expect(seen).To(gomega.Equal(want), "the follower's changes against the primary's feed")
}
