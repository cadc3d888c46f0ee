package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
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
