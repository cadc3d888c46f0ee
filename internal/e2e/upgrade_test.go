package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// previousRelease builds, or finds cached, the fleet-manager of the commit
// scripts/release/previous-release names.
func previousRelease(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../scripts/release/build-previous.sh").Output()
	if err != nil {
		stderr := ""
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("scripts/release/build-previous.sh: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// migrateWith runs binary's migrate on db, as the new release's init
// container does while the old release still serves.
func migrateWith(t *testing.T, binary string, db postgres.Config) {
	t.Helper()
	cmd := exec.Command(binary, "migrate", "--log-format=json", "--db-host="+db.Host, "--db-port="+strconv.Itoa(db.Port),
		"--db-user="+db.User, "--db-name="+db.Name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s migrate: %v\n%s", binary, err, out)
	}
}

// clusterNames lists the caller's registrations through fm.
func clusterNames(t *testing.T, fm *fleetManager, token string) []string {
	t.Helper()
	resp, err := fm.Public.ListClustersWithResponse(context.Background(), &public.ListClustersParams{}, bearer(token))
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("ListClusters through %s = %v %s, %v", fm.Base, resp.StatusCode(), resp.Body, err)
	}
	var names []string
	for _, c := range resp.JSON200.Items {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names
}

// TestPreviousReleaseRunsOnTheNewSchema is the zero-downtime rule of
// docs/migrations.md played as a rolling upgrade: the previous release
// serves, this tree's migrations are applied under it (expand), a replica of
// this tree joins it (deploy), and each replica keeps registering, reading
// and deleting what the other wrote, through the same hub and agent.
func TestPreviousReleaseRunsOnTheNewSchema(t *testing.T) {
	t.Parallel()
	previous := previousRelease(t)
	hydra := hydratest.Start(t)
	hub := testHub(t)
	old := newFleetManagerOn(t, hydra, pgtest.NewDatabase(t))
	old.binary = previous
	old.start()
	s := newStackOn(t, "upgrade", hydra, hub, old)
	before := s.register("upgrade-before")
	s.waitPhase(before.Id, public.Ready)

	// Expand: this tree's migrations, while the previous release serves.
	migrateWith(t, fleetManagerBinary, old.db)
	s.g.Expect(readyz(old)).To(gomega.Equal(http.StatusOK), "the previous release's /readyz on the new schema")
	// A pod of the previous release restarted mid-rollout starts on it.
	old.stop()
	old.start()
	during := s.register("upgrade-during")
	s.waitPhase(during.Id, public.Ready)

	// Deploy: a replica of this tree beside it.
	next := old.sibling(fleetManagerBinary)
	next.start()
	s.fm = next
	after := s.register("upgrade-after")
	s.waitPhase(after.Id, public.Ready)
	want := []string{"upgrade-after", "upgrade-before", "upgrade-during"}
	for _, fm := range []*fleetManager{old, next} {
		s.g.Expect(clusterNames(t, fm, s.user)).To(gomega.Equal(want), "registrations read through %s", fm.Base)
	}

	// The previous release deletes what this tree registered; this tree
	// deletes what the previous release registered (a rollback, or a
	// request landing on either replica mid-rollout).
	for _, c := range []struct {
		fm      *fleetManager
		cluster public.Cluster
	}{{old, after}, {next, before}} {
		resp, err := c.fm.Public.DeleteClusterWithResponse(context.Background(), c.cluster.Id, bearer(s.user))
		if err != nil || resp.StatusCode() != http.StatusAccepted {
			t.Fatalf("DeleteCluster(%s) through %s = %v, %v", c.cluster.Name, c.fm.Base, statusOf(resp), err)
		}
		s.fm = c.fm
		s.waitGone(c.cluster.Id)
		s.waitOnHub(managedClusterName(c.cluster), false)
	}
	s.g.Expect(clusterNames(t, old, s.user)).To(gomega.Equal([]string{"upgrade-during"}))
}

func readyz(fm *fleetManager) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", fm.health))
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func statusOf(resp *public.DeleteClusterResponse) any {
	if resp == nil {
		return "no answer"
	}
	return fmt.Sprintf("%d %s", resp.StatusCode(), resp.Body)
}
