package e2e

import (
	"context"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/hub/governancetest"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

var (
	policiesGVR          = hubkind.Policy.GVR()
	placementsGVR        = hubkind.Placement.GVR()
	placementBindingsGVR = hubkind.PlacementBinding.GVR()
)

// setCompliance reports state for cluster under each root policy named in
// roots (in policyNamespace), as the governance-policy-framework-addon's
// status-sync would once the cluster evaluated it: it writes the status of
// the policy's replica in the cluster's namespace
// (governancetest.SetReplicatedCompliance). Everything else is real: OCM's
// placement controller decides the cluster, the propagator makes the
// replica and aggregates its status into the root policy. The addon is
// played because the Go module proxy serves no version of it
// (docs/automated-testing.md). It waits for the replica the propagator makes.
func (s *stack) setCompliance(cluster, state string, roots ...string) {
	s.t.Helper()
	dyn := hubtest.Dynamic(s.t)
	for _, root := range roots {
		s.g.Eventually(func() error {
			return governancetest.SetReplicatedCompliance(context.Background(), dyn, cluster, policyNamespace, root, state, "set by the test")
		}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(gomega.Succeed(),
			"the replica of %s in %s, made by the propagator", root, cluster)
	}
}
