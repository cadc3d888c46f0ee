package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// TestHubOwnerOnlyOverItsOwnRegistrations gives a shared hub an owner: refused
// (CodeHubInUse, a 409) while another organisation's registration is placed
// there, since the owner would then list that organisation's clusters and
// reach them with its policies; accepted once only the owner's remain. The
// refusal changes nothing and names no organisation.
func TestHubOwnerOnlyOverItsOwnRegistrations(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newInventoryEnv(t)
	ctx := context.Background()
	place := func(org, name string) fleet.Registration {
		reg, _, err := e.store.CreateRegistration(ctx, fleet.Identity{OrgID: org, Username: "u"},
			fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP}, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET hub_id = ? WHERE id = ?`, e.hub.ID, reg.ID).Error).NotTo(gomega.HaveOccurred())
		return reg
	}
	place("org-a", "mine")
	other := place("org-b", "theirs")
	a := "org-a"

	_, err := e.store.UpdateHub(ctx, e.hub.ID, nil, fleet.HubUpdate{OwnerOrgID: &a})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeHubInUse))
	g.Expect(fleet.ErrorMessageOf(err)).NotTo(gomega.ContainSubstring("org-b"))
	hub, err := e.store.FindHub(ctx, e.hub.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hub.OwnerOrgID).To(gomega.BeEmpty(), "a refused update changes nothing")
	g.Expect(hub.Generation).To(gomega.Equal(e.hub.Generation))

	// A deregistered registration no longer counts.
	g.Expect(e.db.Gorm.Exec(`UPDATE registrations SET deleted_at = now() WHERE id = ?`, other.ID).Error).NotTo(gomega.HaveOccurred())
	hub, err = e.store.UpdateHub(ctx, e.hub.ID, nil, fleet.HubUpdate{OwnerOrgID: &a})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hub.OwnerOrgID).To(gomega.Equal("org-a"))
}

// TestFindHubLocksTheRow: the hub reads that guard a change (UpdateHub's
// If-Match and owner checks, DeleteHub's placed count, hub_mgr's Ready
// condition beside the agent's) lock the hub's row. They asked for the lock
// with GORM v1's "gorm:query_option", which v2 ignores: nothing was locked,
// and hub_mgr's write of Ready lost the HubAgentReady a heartbeat wrote
// meanwhile.
func TestFindHubLocksTheRow(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newInventoryEnv(t)
	tx := e.db.Gorm.Begin()
	t.Cleanup(func() { tx.Rollback() })
	g.Expect(postgres.FindHubForTest(tx, e.hub.ID, true)).To(gomega.Succeed())
	err := e.db.Gorm.Exec(`SELECT 1 FROM hubs WHERE id = ? FOR UPDATE NOWAIT`, e.hub.ID).Error
	var pgErr *pgconn.PgError
	g.Expect(errors.As(err, &pgErr)).To(gomega.BeTrue(), "another transaction took the row: %v", err)
	g.Expect(pgErr.Code).To(gomega.Equal("55P03"), "lock_not_available")
	tx.Rollback()
	g.Expect(e.db.Gorm.Exec(`SELECT 1 FROM hubs WHERE id = ? FOR UPDATE NOWAIT`, e.hub.ID).Error).To(gomega.Succeed())
}
