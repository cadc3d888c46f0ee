// Package e2e holds the end-to-end tests: the fleet-manager binary, the
// fleetshard-sync agent, a real hub (kube-apiserver with the RHACM CRDs) and
// the real PostgreSQL, with the agent's token from a real OIDC issuer (Ory
// Hydra). Nothing plays RHACM's controllers on the test hub, so the tests do,
// as a real hub would: they accept ManagedClusters and set their conditions,
// write the <name>-import secret, and remove finalizers on deletion.
package e2e
