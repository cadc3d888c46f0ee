package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// policyNamespace is the namespace a desired policy's objects go to.
func policyNamespace(p fleet.DesiredPolicy) any {
	return desiredObject(p, "Policy")["metadata"].(map[string]any)["namespace"]
}

// TestPolicyDeliveryChangeMovesTheHubsHoldingPolicies starts stores with
// --policy-namespace unchanged and changed: only a change (or the first
// record) moves the desired sets, and only of the hubs that hold a policy.
func TestPolicyDeliveryChangeMovesTheHubsHoldingPolicies(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newPolicyEnv(t)
	ctx := context.Background()
	p, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-c"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("c", "inform"), Selector: prodSelector()})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(p.Hubs).To(gomega.Equal(1), "placed on org-c's own hub only")
	_, ownedRev, _ := e.desiredPolicies(e.owned.ID, "agent-owned")
	_, sharedRev, _ := e.desiredPolicies(e.hub.ID, "agent-1")

	moved, err := e.store.SyncPolicyDelivery(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved).To(gomega.Equal(1), "the first record moves the hubs holding a policy")
	moved, err = e.store.SyncPolicyDelivery(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved).To(gomega.BeZero(), "a start with the same flags moves nothing")

	cfg := postgres.DefaultStoreConfig()
	cfg.Policies.Namespace = "fleet-policies-moved"
	restarted := postgres.NewStore(e.db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, cfg, authz.MustDefault())
	moved, err = restarted.SyncPolicyDelivery(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved).To(gomega.Equal(1))
	set, err := restarted.DesiredSet(ctx, e.owned.ID, "agent-owned")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(set.Revision).To(gomega.Equal(ownedRev+2), "moved by the first record and by the change")
	g.Expect(set.Policies).To(gomega.HaveLen(1))
	g.Expect(policyNamespace(set.Policies[0])).To(gomega.Equal("fleet-policies-moved"))
	_, rev, _ := e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(rev).To(gomega.Equal(sharedRev), "a hub without policies does not move")
	moved, err = restarted.SyncPolicyDelivery(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved).To(gomega.BeZero())
}

// TestHubOwnerChangeMovesItsDesiredSet gives a shared hub holding an
// organisation's policy to that organisation: the policy's Placement on it
// no longer narrows to the organisation's label, and the hub's revision
// moves so that its agent applies that; an update leaving the owner as it
// was moves nothing.
func TestHubOwnerChangeMovesItsDesiredSet(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newPolicyEnv(t)
	ctx := context.Background()
	_, err := e.store.CreatePolicy(ctx, fleet.Identity{OrgID: "org-a"}, fleet.PolicyCreate{Zone: "eu", Body: policyBody("a", "inform"), Selector: prodSelector()})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, before, policies := e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(policies).To(gomega.HaveLen(1))
	g.Expect(placementSelector(policies[0])).To(gomega.Equal(map[string]any{
		"matchLabels": map[string]any{"env": "prod", fleet.LabelOrgID: "org-a"}}))

	capacity := 20
	_, err = e.store.UpdateHub(ctx, e.hub.ID, nil, fleet.HubUpdate{Capacity: &capacity})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, rev, _ := e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(rev).To(gomega.Equal(before), "a capacity change moves no revision")

	owner := "org-a"
	_, err = e.store.UpdateHub(ctx, e.hub.ID, nil, fleet.HubUpdate{OwnerOrgID: &owner})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, rev, policies = e.desiredPolicies(e.hub.ID, "agent-1")
	g.Expect(rev).To(gomega.Equal(before + 1))
	g.Expect(policies).To(gomega.HaveLen(1))
	g.Expect(placementSelector(policies[0])).To(gomega.Equal(map[string]any{"matchLabels": map[string]any{"env": "prod"}}),
		"on the organisation's own hub every cluster is its own")
}
