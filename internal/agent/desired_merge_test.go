package agent

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// TestMergeDesiredMakesTheWholeSet: a delta merged into the set it starts
// from keeps the unchanged entries in their order, replaces the changed
// ones in place, drops the removed ones, appends the new ones in the
// delta's order, and takes the delta's revision and policies.
func TestMergeDesiredMakesTheWholeSet(t *testing.T) {
	g := gomega.NewWithT(t)
	reg := func(id string, gen int64) private.DesiredRegistration {
		return private.DesiredRegistration{RegistrationId: id, Generation: gen, ManagedClusterName: "mc-" + id}
	}
	base := &private.DesiredSet{Kind: private.DesiredSetKindDesiredSet, HubId: "h", Revision: 4,
		Registrations: []private.DesiredRegistration{reg("a", 1), reg("b", 1), reg("c", 1), reg("d", 1)}}
	policies := []private.DesiredPolicy{{PolicyId: "p", Generation: 2}}
	four := int64(4)
	delta := &private.DesiredSet{Kind: private.DesiredSetKindDesiredSet, HubId: "h", Revision: 7, BaseRevision: &four,
		Registrations:        []private.DesiredRegistration{reg("e", 1), reg("b", 2), reg("f", 1)},
		RemovedRegistrations: &[]string{"c", "x-never-held"}, Policies: &policies}

	whole := mergeDesired(base, delta)
	g.Expect(whole.Revision).To(gomega.Equal(int64(7)))
	g.Expect(whole.BaseRevision).To(gomega.BeNil(), "the merged set is whole")
	g.Expect(whole.Policies).To(gomega.Equal(&policies))
	g.Expect(whole.Registrations).To(gomega.Equal([]private.DesiredRegistration{reg("a", 1), reg("b", 2), reg("d", 1), reg("e", 1), reg("f", 1)}))
	g.Expect(base.Registrations).To(gomega.HaveLen(4), "the base is left as it was")
	g.Expect(base.Registrations[1].Generation).To(gomega.Equal(int64(1)))
}
