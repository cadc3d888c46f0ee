package rest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// TestRequestStatementsNameTheOperation holds a lock on the hubs table while
// an admin lists the hubs, and reads in pg_stat_activity that the request's
// waiting statement names its OpenAPI operationId, not the caller's
// X-Operation-ID.
func TestRequestStatementsNameTheOperation(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newStackEnv(t, flavours()[0])
	other := pgtest.Open(t, e.dbCfg)
	locker := other.Gorm.Begin()
	t.Cleanup(func() { locker.Rollback() })
	g.Expect(locker.Exec(`LOCK TABLE hubs IN ACCESS EXCLUSIVE MODE`).Error).To(gomega.Succeed())

	token := e.adminToken(t)
	status := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := e.admin.ListHubsWithResponse(ctx, nil, adminAuth(token),
			admin.RequestEditorFn(header("X-Operation-ID", "callers-own-id")))
		if err != nil {
			status <- 0
			return
		}
		status <- resp.StatusCode()
	}()
	waiting := func() ([]string, error) {
		var queries []string
		err := other.Gorm.Raw(`SELECT left(query, 22) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&queries).Error
		return queries, err
	}
	g.Eventually(waiting).WithTimeout(20*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.ContainElement("/* op=listHubs */ SELE"), "the blocked statement of GET /hubs")
	g.Expect(locker.Rollback().Error).To(gomega.Succeed())
	g.Eventually(status).WithTimeout(20 * time.Second).Should(gomega.Receive(gomega.Equal(http.StatusOK)))
}
