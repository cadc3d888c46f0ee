package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// refusingPermit records what each write asked and refuses it.
type refusingPermit struct{ asked []fleet.AuthzResource }

func (p *refusingPermit) permit(_ context.Context, res fleet.AuthzResource) error {
	p.asked = append(p.asked, res)
	return fleet.Errorf(fleet.CodeActionForbidden, "refused by the test")
}

// TestWritesAskThePermitWithTheLockedRow: every change and deletion of an
// organisation's row asks the caller's Permit once, inside its transaction,
// with the row it locked (kind, id, organisation and creator); a refusal
// answers the Permit's error and leaves the row as it was. Another
// organisation's row is not found before anything is asked.
func TestWritesAskThePermitWithTheLockedRow(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}

	reg, _, err := store.CreateRegistration(ctx, alice, fleet.RegistrationCreate{Name: "asked", Zone: "eu", Product: fleet.ProductOCP}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	policy, err := store.CreatePolicy(ctx, alice, fleet.PolicyCreate{Zone: "eu", Body: policyBody("asked", "inform")})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	pool := newPool(t, store, alice, "asked", 0, 1)
	display := "changed"

	writes := []struct {
		name  string
		want  fleet.AuthzResource
		write func(fleet.Permit, string) error
		check func() // the row is as it was
	}{
		{"UpdateRegistration", fleet.AuthzResource{Kind: "cluster", ID: reg.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				_, err := store.UpdateRegistration(ctx, p, org, reg.ID, nil, fleet.RegistrationUpdate{DisplayName: &display})
				return err
			},
			func() {
				got, err := store.FindRegistration(ctx, "org-a", reg.ID)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(got.Generation).To(gomega.Equal(reg.Generation), "a refused update")
			}},
		{"RequestRegistrationDeletion", fleet.AuthzResource{Kind: "cluster", ID: reg.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				_, err := store.RequestRegistrationDeletion(ctx, p, org, reg.ID)
				return err
			},
			func() {
				got, err := store.FindRegistration(ctx, "org-a", reg.ID)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(got.DeletionRequestedAt).To(gomega.BeNil(), "a refused deregistration")
			}},
		{"FindImportMaterial", fleet.AuthzResource{Kind: "cluster", ID: reg.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				_, err := store.FindImportMaterial(ctx, p, org, reg.ID)
				return err
			}, func() {}},
		{"UpdatePolicy", fleet.AuthzResource{Kind: "policy", ID: policy.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				_, err := store.UpdatePolicy(ctx, p, org, policy.ID, nil, fleet.PolicyUpdate{Body: policyBody("asked", "enforce")})
				return err
			},
			func() {
				got, err := store.FindPolicy(ctx, "org-a", policy.ID)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(got.Generation).To(gomega.Equal(policy.Generation), "a refused policy update")
			}},
		{"DeletePolicy", fleet.AuthzResource{Kind: "policy", ID: policy.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error { return store.DeletePolicy(ctx, p, org, policy.ID, nil) },
			func() {
				_, err := store.FindPolicy(ctx, "org-a", policy.ID)
				g.Expect(err).NotTo(gomega.HaveOccurred(), "a refused policy deletion")
			}},
		{"CreateBlueprintVersion", fleet.AuthzResource{Kind: "blueprint", ID: pool.BlueprintID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				_, err := store.CreateBlueprintVersion(ctx, p, fleet.Identity{OrgID: org, Username: "alice"}, pool.BlueprintID, poolBlueprint("4.16.4"))
				return err
			},
			func() {
				got, err := store.FindBlueprint(ctx, "org-a", pool.BlueprintID)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(got.LatestVersion).To(gomega.Equal(1), "a refused version")
			}},
		{"DeleteBlueprintVersion", fleet.AuthzResource{Kind: "blueprint", ID: pool.BlueprintID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				return store.DeleteBlueprintVersion(ctx, p, org, pool.BlueprintID, 1)
			},
			func() {
				_, err := store.FindBlueprintVersion(ctx, "org-a", pool.BlueprintID, 1)
				g.Expect(err).NotTo(gomega.HaveOccurred(), "a refused version deletion")
			}},
		{"DeleteBlueprint", fleet.AuthzResource{Kind: "blueprint", ID: pool.BlueprintID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error { return store.DeleteBlueprint(ctx, p, org, pool.BlueprintID) },
			func() {
				_, err := store.FindBlueprint(ctx, "org-a", pool.BlueprintID)
				g.Expect(err).NotTo(gomega.HaveOccurred(), "a refused blueprint deletion")
			}},
		{"UpdatePool", fleet.AuthzResource{Kind: "pool", ID: pool.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error {
				_, err := store.UpdatePool(ctx, p, org, pool.ID, nil, fleet.PoolUpdate{MaxClusters: intPtr(2)})
				return err
			},
			func() {
				got, err := store.FindPool(ctx, "org-a", pool.ID)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(got.Generation).To(gomega.Equal(pool.Generation), "a refused pool update")
			}},
		{"RequestPoolDeletion", fleet.AuthzResource{Kind: "pool", ID: pool.ID, OrgID: "org-a", CreatedBy: "alice"},
			func(p fleet.Permit, org string) error { return store.RequestPoolDeletion(ctx, p, org, pool.ID, nil) },
			func() {
				got, err := store.FindPool(ctx, "org-a", pool.ID)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(got.DeletionRequestedAt).To(gomega.BeNil(), "a refused pool deletion")
			}},
	}
	for _, w := range writes {
		p := &refusingPermit{}
		err := w.write(p.permit, "org-b")
		g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound), "%s of another organisation's row", w.name)
		g.Expect(p.asked).To(gomega.BeEmpty(), "%s asked the Permit about a row it did not find", w.name)

		err = w.write(p.permit, "org-a")
		g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeActionForbidden), "%s refused by its Permit", w.name)
		g.Expect(p.asked).To(gomega.Equal([]fleet.AuthzResource{w.want}), "what %s asked", w.name)
		w.check()
	}
}
