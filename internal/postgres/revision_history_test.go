package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/readreplica/readreplicatest"
)

// TestRevisionHistoryMovesWhenAStandbyTakesOver: the hub's revisions, as an
// agent reads them, name their history; a standby promoted in the
// primary's place (as after a failover, or a restore to a point in time,
// which ends in a promotion too) is the same database in another history,
// so an agent holding the old one's revisions asks for the whole set.
func TestRevisionHistoryMovesWhenAStandbyTakesOver(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	e := readreplicatest.New(t, readreplicatest.ShortBound, authz.MustDefault())
	before, err := e.Direct.FindAgentHub(ctx, e.Hub.ID, "agent-1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	set, err := e.Direct.DesiredChanges(ctx, e.Hub.ID, "agent-1", 0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(before.RevisionHistory).To(gomega.MatchRegexp(`^[0-9]+\.[0-9A-F]{8}$`))
	g.Expect(set.RevisionHistory).To(gomega.Equal(before.RevisionHistory), "the desired set names the history the hub read does")

	e.StandbySQL("SELECT pg_promote()")
	promoted := e.StandbyDB()
	store := postgres.NewStore(promoted, nil, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	var after fleet.Hub
	g.Eventually(func() error {
		after, err = store.FindAgentHub(ctx, e.Hub.ID, "agent-1")
		return err
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(gomega.Succeed(), "reading the hub on the promoted standby")
	g.Expect(after.Revision).To(gomega.Equal(before.Revision))
	sysBefore, _, _ := strings.Cut(before.RevisionHistory, ".")
	sysAfter, _, _ := strings.Cut(after.RevisionHistory, ".")
	g.Expect(sysAfter).To(gomega.Equal(sysBefore), "the same database")
	g.Expect(after.RevisionHistory).NotTo(gomega.Equal(before.RevisionHistory), "in another history")
}

// TestRevisionHistoryIsEmptyWhereItCannotBeRead: on a standby the timeline
// function fails; the history is then empty, and the agents' reads go on.
func TestRevisionHistoryIsEmptyWhereItCannotBeRead(t *testing.T) {
	t.Parallel()
	e := readreplicatest.New(t, readreplicatest.ShortBound, authz.MustDefault())
	var history string
	db := e.StandbyDB()
	if err := db.Gorm.Raw(`SELECT fleet_revision_history()`).Row().Scan(&history); err != nil {
		t.Fatalf("fleet_revision_history() on a standby: %v", err)
	}
	if history != "" {
		t.Errorf("fleet_revision_history() on a standby = %q, want empty", history)
	}
}
