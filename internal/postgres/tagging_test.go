package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// ownActivity is what pg_stat_activity says of the session running it: the
// statement that asks, as the server received it, and the session's
// application_name.
const ownActivity = `SELECT query, application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`

type activity struct {
	Query           string
	ApplicationName string
}

// TestStatementsNameTheirOperationAndComponent runs statements under an
// operation through every path to the server (GORM outside and inside a
// transaction, the pgx batch of the fast reads) and reads back, in
// pg_stat_activity, the comment naming the operation and the connection's
// application_name.
func TestStatementsNameTheirOperationAndComponent(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	cfg.ApplicationName = "fleet-manager/test-tagging"
	db := pgtest.Open(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name, operation, comment string
		run                      func(ctx context.Context) (activity, error)
	}{
		{"gorm", "listManagedClusters", "/* op=listManagedClusters */ ", func(ctx context.Context) (a activity, err error) {
			return a, db.Gorm.WithContext(ctx).Raw(ownActivity).Scan(&a).Error
		}},
		{"transaction", "provisioning_mgr", "/* op=provisioning_mgr */ ", func(ctx context.Context) (a activity, err error) {
			return a, db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return tx.Raw(ownActivity).Scan(&a).Error })
		}},
		{"batch", "getManagedCluster", "/* op=getManagedCluster */ ", func(ctx context.Context) (a activity, err error) {
			read := postgres.ReadOneForTest(&a.Query, &a.ApplicationName)
			return a, postgres.RoundTripForTest(ctx, db, postgres.NewStatementForTest(ownActivity, nil, false, read))
		}},
		{"generic batch", "listManagedClusterChanges", "/* op=listManagedClusterChanges */ ", func(ctx context.Context) (a activity, err error) {
			read := postgres.ReadOneForTest(&a.Query, &a.ApplicationName)
			return a, postgres.RoundTripForTest(ctx, db, postgres.NewStatementForTest(ownActivity, nil, true, read))
		}},
		{"hostile name", "x */ DROP TABLE y; --", "/* op=x__/_DROP_TABLE_y__-- */ ", func(ctx context.Context) (a activity, err error) {
			return a, db.Gorm.WithContext(ctx).Raw(ownActivity).Scan(&a).Error
		}},
		{"no operation", "", "", func(ctx context.Context) (a activity, err error) {
			return a, db.Gorm.WithContext(ctx).Raw(ownActivity).Scan(&a).Error
		}},
	} {
		got, err := tc.run(fleet.NewContextWithOperation(ctx, tc.operation))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := tc.comment + ownActivity; got.Query != want {
			t.Errorf("%s: pg_stat_activity.query = %q, want %q", tc.name, got.Query, want)
		}
		if got.ApplicationName != cfg.ApplicationName {
			t.Errorf("%s: pg_stat_activity.application_name = %q, want %q", tc.name, got.ApplicationName, cfg.ApplicationName)
		}
	}
}

// TestListenerNamesItsConnection checks that the listener's connection is
// told apart from the pool's in pg_stat_activity.
func TestListenerNamesItsConnection(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	cfg := pgtest.NewDatabase(t)
	cfg.ApplicationName = "fleet-manager/test-" + strings.TrimPrefix(cfg.Name, "fmtest_")
	db := pgtest.Open(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	listener := postgres.NewListener(cfg, slog.New(slog.DiscardHandler), postgres.ChannelHubs)
	go func() { defer close(done); listener.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	listening := func() ([]string, error) {
		var queries []string
		err := db.Gorm.Raw(`SELECT query FROM pg_stat_activity WHERE application_name = ?`,
			cfg.ApplicationName+postgres.ListenerApplicationSuffix).Scan(&queries).Error
		return queries, err
	}
	g.Eventually(listening).WithTimeout(20 * time.Second).WithPolling(20 * time.Millisecond).
		Should(gomega.ConsistOf(`LISTEN "` + postgres.ChannelHubs + `"`))
}
