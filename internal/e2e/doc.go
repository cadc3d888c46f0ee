// Package e2e holds the end-to-end tests: the fleet-manager binary, the
// fleetshard-sync agent, a real hub (kube-apiserver with the RHACM CRDs) and
// the real PostgreSQL, with the agent's token from a real OIDC issuer (Ory
// Hydra). The hub runs the upstream engines Fleet Manager drives: OCM's
// registration, placement and work controllers and the governance policy
// propagator (startHub). Each registered cluster is joined by a real
// klusterlet registration agent, deployed by a stand-in for RHACM's import
// controller, which is not served (importController); a capacity pool's
// clusters are installed and imported by provisiontest, which plays Hive.
// What a managed cluster's policy framework reports is played
// (setCompliance). docs/automated-testing.md lists what is real and what is
// played, and why.
package e2e
