// Package realocm holds the end-to-end registration and pool add-on tests
// against upstream open-cluster-management: the fleet-manager binary, the
// fleetshard-sync agent with its token from Ory Hydra, and the test hub
// running OCM's own
// hub controllers (internal/hub/ocmtest) with a managed cluster whose
// klusterlet agents join it. It is a test binary of its own because OCM's
// registration controller manages every ManagedCluster on its hub: on the
// hub internal/e2e shares, it would fight playRHACM over the other tests'
// clusters. Only RHACM's downstream import controller, which is not served,
// is played here, and, for the pool test, Hive (internal/hub/provisiontest).
package realocm
