package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestServeNamesItsConnections runs `serve` and reads in pg_stat_activity
// that its pool's connections and its listener's carry their
// application_name, and that the last statement of a pooled connection
// names an operation of the replica (its start or a reconciler).
func TestServeNamesItsConnections(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db, cfg := pgtest.NewMigratedDatabase(t)
	ports := newServePorts(t)
	_, stop := startServe(t, nil, append(append(dbFlags(cfg), ports.flags()...), "--auth-dev-key-dir="+t.TempDir(), keyFlag(t),
		"--db-application-name=fleet-manager/serve-tagging-test")...)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports.health), http.StatusOK)

	sessions := func() (map[string]bool, error) {
		var rows []struct{ ApplicationName, Operation string }
		err := db.Gorm.Raw(`SELECT application_name, coalesce(substring(query FROM '^/\* op=([A-Za-z0-9_./-]+) \*/'), '') AS operation
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&rows).Error
		seen := map[string]bool{}
		for _, r := range rows {
			seen[r.ApplicationName] = true
			seen[r.ApplicationName+" op="+r.Operation] = true
		}
		return seen, err
	}
	g.Eventually(sessions).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(gomega.SatisfyAll(
		gomega.HaveKey("fleet-manager/serve-tagging-test"),
		gomega.HaveKey("fleet-manager/serve-tagging-test/listener"),
		gomega.Or(gomega.HaveKey("fleet-manager/serve-tagging-test op=serve"), gomega.HaveKey("fleet-manager/serve-tagging-test op=provisioning_mgr"),
			gomega.HaveKey("fleet-manager/serve-tagging-test op=hub_mgr"), gomega.HaveKey("fleet-manager/serve-tagging-test op=housekeeping"))))
	if err := stop(); err != nil {
		t.Errorf("serve after shutdown = %v", err)
	}
}
