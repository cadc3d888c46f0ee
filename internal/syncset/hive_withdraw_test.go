package syncset_test

import (
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/syncset/hivetest"
)

func TestHiveWithdrawDeletesSyncSet(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	e.deliver(reg)
	for range 2 {
		report, err := e.delivery.Withdraw(t.Context(), e.fleetHub, reg)
		e.g.Expect(err).NotTo(gomega.HaveOccurred())
		e.g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeTrue()), gomega.HaveField("Reason", fleet.ReasonSyncSetDeleted), gomega.HaveField("NoAgent", gomega.BeTrue())))
		_, err = e.syncSet(reg)
		e.g.Expect(err).To(hiveNotFound())
		_, err = e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, e.sourceSecretName(reg))
		e.g.Expect(err).To(hiveNotFound())
	}
}

func TestHiveWithdrawRemovesObjects(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	e.runHive(t)
	reg := hiveRegistration(t)
	mcName := fleet.ManagedClusterName(reg)
	e.deliver(reg)
	e.g.Eventually(func() error { _, err := e.get(hiveManagedClustersGVR, "", mcName); return err }).Should(gomega.Succeed())
	e.g.Eventually(func() error { _, err := e.get(hiveSecretsGVR, mcName, fleet.AutoImportSecretName); return err }).Should(gomega.Succeed())

	e.g.Eventually(func() (fleet.DeliveryReport, error) { return e.delivery.Withdraw(t.Context(), e.fleetHub, reg) }).
		Should(gomega.And(gomega.HaveField("Done", gomega.BeTrue()), gomega.HaveField("Reason", fleet.ReasonSyncSetDeleted)))
	// Done means Hive no longer tracks anything of the SyncSet: it deleted it all.
	_, err := e.get(hiveManagedClustersGVR, "", mcName)
	e.g.Expect(err).To(hiveNotFound())
	_, err = e.get(hiveAddonConfigsGVR, mcName, mcName)
	e.g.Expect(err).To(hiveNotFound())
	_, err = e.get(hiveSecretsGVR, mcName, fleet.AutoImportSecretName)
	e.g.Expect(err).To(hiveNotFound())
	ns, err := e.get(hiveNamespacesGVR, "", mcName)
	if err == nil {
		e.g.Expect(ns.GetDeletionTimestamp()).NotTo(gomega.BeNil(), "the namespace is deleted (it stays Terminating without a namespace controller)")
	} else {
		e.g.Expect(err).To(hiveNotFound())
	}
}

func TestHiveReleaseLeavesObjects(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	e.runHive(t)
	reg := hiveRegistration(t)
	mcName := fleet.ManagedClusterName(reg)
	e.deliver(reg)
	e.g.Eventually(func() error { _, err := e.get(hiveSecretsGVR, mcName, fleet.AutoImportSecretName); return err }).Should(gomega.Succeed())

	e.g.Eventually(func() (fleet.DeliveryReport, error) { return e.delivery.Release(t.Context(), e.fleetHub, reg) }).
		Should(gomega.And(gomega.HaveField("Done", gomega.BeTrue()), gomega.HaveField("Reason", fleet.ReasonHandingOff)))
	_, err := e.syncSet(reg)
	e.g.Expect(err).To(hiveNotFound())
	_, err = e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, e.sourceSecretName(reg))
	e.g.Expect(err).To(hiveNotFound())
	// Once Hive has processed the deletion it no longer tracks the SyncSet.
	e.g.Eventually(func() ([]hivetest.SyncStatus, error) {
		return hivetest.ReadSyncStatuses(t.Context(), e.dyn, e.fleetHub.Hive.Namespace, e.fleetHub.Hive.ClusterDeployment)
	}).ShouldNot(gomega.ContainElement(gomega.HaveField("Name", fleet.SyncSetName(reg))))
	mc, err := e.get(hiveManagedClustersGVR, "", mcName)
	e.g.Expect(err).NotTo(gomega.HaveOccurred(), "the ManagedCluster stays for the agent")
	e.g.Expect(mc.GetDeletionTimestamp()).To(gomega.BeNil())
	_, err = e.get(hiveSecretsGVR, mcName, fleet.AutoImportSecretName)
	e.g.Expect(err).NotTo(gomega.HaveOccurred(), "the auto-import Secret stays")
	ns, err := e.get(hiveNamespacesGVR, "", mcName)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(ns.GetDeletionTimestamp()).To(gomega.BeNil())
}

func TestHiveReleaseWaitsForHiveToSeeUpsert(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	name, target := fleet.SyncSetName(reg), *e.fleetHub.Hive
	e.deliver(reg)
	tracked := []hivetest.ResourceRef{{APIVersion: "cluster.open-cluster-management.io/v1", Kind: "ManagedCluster", Name: fleet.ManagedClusterName(reg)}}
	now := metav1.Now()
	hivetest.WriteSyncStatuses(t.Context(), t, e.dyn, target.Namespace, target.ClusterDeployment, []hivetest.SyncStatus{
		{Name: name, ObservedGeneration: 1, ResourcesToDelete: tracked, Result: hivetest.ResultSuccess, LastTransitionTime: now}})

	for range 2 {
		report, err := e.delivery.Release(t.Context(), e.fleetHub, reg)
		e.g.Expect(err).NotTo(gomega.HaveOccurred())
		e.g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeFalse()), gomega.HaveField("Reason", fleet.ReasonHandingOff),
			gomega.HaveField("Message", gomega.ContainSubstring("waiting for Hive to see resourceApplyMode Upsert"))))
		ss, err := e.syncSet(reg)
		e.g.Expect(err).NotTo(gomega.HaveOccurred(), "the SyncSet stays until Hive saw Upsert")
		e.g.Expect(hiveField(ss, "spec", "resourceApplyMode")).To(gomega.Equal("Upsert"))
		e.g.Expect(ss.GetGeneration()).To(gomega.Equal(int64(2)), "the mode is patched once")
	}

	hivetest.WriteSyncStatuses(t.Context(), t, e.dyn, target.Namespace, target.ClusterDeployment, []hivetest.SyncStatus{
		{Name: name, ObservedGeneration: 2, ResourcesToDelete: tracked, Result: hivetest.ResultSuccess, LastTransitionTime: now}})
	report, err := e.delivery.Release(t.Context(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeFalse()), gomega.HaveField("Message", gomega.ContainSubstring("stop tracking 1 objects"))))

	hivetest.WriteSyncStatuses(t.Context(), t, e.dyn, target.Namespace, target.ClusterDeployment, []hivetest.SyncStatus{
		{Name: name, ObservedGeneration: 2, Result: hivetest.ResultSuccess, LastTransitionTime: now}})
	report, err = e.delivery.Release(t.Context(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeTrue()), gomega.HaveField("Reason", fleet.ReasonHandingOff)))
	_, err = e.syncSet(reg)
	e.g.Expect(err).To(hiveNotFound())
}

func TestHiveWithdrawWaitsForHiveToDelete(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	target := *e.fleetHub.Hive
	e.deliver(reg)
	hivetest.WriteSyncStatuses(t.Context(), t, e.dyn, target.Namespace, target.ClusterDeployment, []hivetest.SyncStatus{{
		Name: fleet.SyncSetName(reg), ResourcesToDelete: []hivetest.ResourceRef{{APIVersion: "v1", Kind: "Namespace", Name: fleet.ManagedClusterName(reg)}},
		Result: hivetest.ResultFailure, FailureMessage: "namespaces is forbidden", LastTransitionTime: metav1.Now(),
	}})
	report, err := e.delivery.Withdraw(t.Context(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeFalse()), gomega.HaveField("Reason", fleet.ReasonWithdrawing),
		gomega.HaveField("Message", gomega.And(gomega.ContainSubstring("still has to delete 1"), gomega.ContainSubstring("namespaces is forbidden")))))
	_, err = e.syncSet(reg)
	e.g.Expect(err).To(hiveNotFound())

	hivetest.WriteSyncStatuses(t.Context(), t, e.dyn, target.Namespace, target.ClusterDeployment, nil)
	report, err = e.delivery.Withdraw(t.Context(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report.Done).To(gomega.BeTrue(), report.Message)
}
