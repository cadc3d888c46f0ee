package syncset_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/hivetest"
)

var (
	hiveSecretsGVR          = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	hiveNamespacesGVR       = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	hiveManagedClustersGVR  = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}
	hiveAddonConfigsGVR     = schema.GroupVersionResource{Group: "agent.open-cluster-management.io", Version: "v1", Resource: "klusterletaddonconfigs"}
	hiveSyncSetAPIVersion   = "hive.openshift.io/v1"
	hiveManagedByFleet      = "fleet-manager"
	hiveEventuallyTimeout   = 30 * time.Second
	hiveEventuallyPolling   = 20 * time.Millisecond
	hiveCallsMetric         = "fleet_manager_syncset_api_calls_total"
	hiveApplyDurationMetric = "fleet_manager_syncset_apply_duration_seconds"
)

// hiveFakeSource is an in-memory syncset.Source: the hub's credentials, and
// the registration's objects as fleet.DesiredObjects renders them (or
// objects, when set).
type hiveFakeSource struct {
	mu      sync.Mutex
	creds   map[string]string
	imports *fleet.ImportCredentials
	objects []map[string]any
}

func (s *hiveFakeSource) HubCredentials(_ context.Context, _ string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.creds), nil
}

func (s *hiveFakeSource) RegistrationObjects(_ context.Context, hubID string, reg fleet.Registration) ([]map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects != nil {
		return s.objects, nil
	}
	return fleet.DesiredObjects(reg, hubID, s.imports), nil
}

func (s *hiveFakeSource) setImports(c *fleet.ImportCredentials) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imports = c
}

// hiveEnv is one test's Hive cluster (the shared test hub, in a namespace
// of its own with its ClusterDeployment) and a delivery to it.
type hiveEnv struct {
	g        *gomega.WithT
	hub      *hubtest.Hub
	dyn      dynamic.Interface
	fleetHub fleet.Hub
	src      *hiveFakeSource
	registry *prometheus.Registry
	delivery *syncset.HiveDelivery
	token    string
}

func hiveRandom(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("rand.Read: %v", err)
	}
	return hex.EncodeToString(b)
}

func hiveNewEnv(t *testing.T) *hiveEnv {
	t.Helper()
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(hiveEventuallyTimeout)
	g.SetDefaultEventuallyPollingInterval(hiveEventuallyPolling)
	hub := hubtest.Start(t)
	dyn := hub.NewDynamicFor(t)
	suffix := hiveRandom(t)
	target := fleet.HiveTarget{Namespace: "hive-" + suffix, ClusterDeployment: "hub-" + suffix}
	hivetest.CreateClusterDeployment(t.Context(), t, dyn, target.Namespace, target.ClusterDeployment)
	kubeconfig, err := os.ReadFile(hub.Kubeconfig(t))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	e := &hiveEnv{g: g, hub: hub, dyn: dyn, registry: prometheus.NewRegistry(), token: "sha256~import-token-" + suffix}
	e.src = &hiveFakeSource{
		creds:   map[string]string{fleet.CredentialHiveKubeconfig: string(kubeconfig)},
		imports: &fleet.ImportCredentials{APIURL: "https://api.spoke-" + suffix + ".example.com:6443", Token: e.token},
	}
	e.fleetHub = fleet.Hub{ID: "hub-id-" + suffix, Name: "hive-hub-" + suffix, DeliveryMode: fleet.DeliverySyncSetHive,
		Hive: &target, HasCredentials: true}
	metrics, err := syncset.NewMetrics("fleet_manager", e.registry)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	e.delivery = syncset.NewHiveDelivery(syncset.DefaultHiveConfig(), e.src, metrics, slog.New(slog.NewTextHandler(t.Output(), nil)))
	return e
}

// runHive starts the Hive stand-in for this test's ClusterDeployment namespace.
func (e *hiveEnv) runHive(t *testing.T) {
	t.Helper()
	hivetest.Run(t.Context(), t, e.dyn, hivetest.NewRESTMapper(t, e.hub.RESTConfig()), e.fleetHub.Hive.Namespace)
}

func hiveRegistration(t *testing.T) fleet.Registration {
	id := hiveRandom(t) + hiveRandom(t) + hiveRandom(t) + hiveRandom(t)
	id = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	return fleet.Registration{ID: id, OrgID: "org-" + hiveRandom(t), Owner: "someone", Name: "cluster",
		Labels: map[string]string{"env": "test"}, Product: fleet.ProductOCP}
}

func (e *hiveEnv) get(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if namespace == "" {
		return e.dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
	}
	return e.dyn.Resource(gvr).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
}

func (e *hiveEnv) syncSet(reg fleet.Registration) (*unstructured.Unstructured, error) {
	return e.get(hivetest.SyncSets, e.fleetHub.Hive.Namespace, fleet.SyncSetName(reg))
}

func (e *hiveEnv) sourceSecretName(reg fleet.Registration) string {
	return fleet.SyncSetName(reg) + "-" + fleet.AutoImportSecretName
}

func (e *hiveEnv) deliver(reg fleet.Registration) {
	report, err := e.delivery.Deliver(context.Background(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report.Done).To(gomega.BeTrue(), report.Message)
}

// hiveField returns the field of obj at path, nil when there is none.
func hiveField(obj *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	return v
}

func hiveNotFound() gomega.OmegaMatcher {
	return gomega.WithTransform(apierrors.IsNotFound, gomega.BeTrue())
}

func TestHiveDeliverPutsObjectsInSyncSet(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	report, err := e.delivery.Deliver(t.Context(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report).To(gomega.And(
		gomega.HaveField("Done", gomega.BeTrue()), gomega.HaveField("Reason", fleet.ReasonSyncSetApplied),
		gomega.HaveField("NoAgent", gomega.BeTrue()), gomega.HaveField("Message", gomega.ContainSubstring(fleet.SyncSetName(reg)))))

	ss, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(ss.GetAPIVersion()).To(gomega.Equal(hiveSyncSetAPIVersion))
	e.g.Expect(ss.GetLabels()).To(gomega.Equal(map[string]string{
		fleet.LabelRegistrationID: reg.ID, fleet.LabelOrgID: reg.OrgID, fleet.LabelHubID: e.fleetHub.ID, fleet.LabelManagedBy: hiveManagedByFleet,
	}))
	e.g.Expect(ss.Object).To(gomega.HaveKeyWithValue("spec", gomega.And(
		gomega.HaveKeyWithValue("clusterDeploymentRefs", gomega.ConsistOf(map[string]any{"name": e.fleetHub.Hive.ClusterDeployment})),
		gomega.HaveKeyWithValue("resourceApplyMode", "Sync"),
	)))
	resources, _, _ := unstructured.NestedSlice(ss.Object, "spec", "resources")
	var kinds []string
	for _, r := range resources {
		kinds = append(kinds, r.(map[string]any)["kind"].(string))
	}
	e.g.Expect(kinds).To(gomega.Equal([]string{"Namespace", "ManagedCluster", "KlusterletAddonConfig"}), "the Secret is no resource")
	mappings, _, _ := unstructured.NestedSlice(ss.Object, "spec", "secretMappings")
	e.g.Expect(mappings).To(gomega.ConsistOf(map[string]any{
		"sourceRef": map[string]any{"name": e.sourceSecretName(reg), "namespace": e.fleetHub.Hive.Namespace},
		"targetRef": map[string]any{"name": fleet.AutoImportSecretName, "namespace": fleet.ManagedClusterName(reg)},
	}))
	body, err := ss.MarshalJSON()
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(string(body)).NotTo(gomega.Or(gomega.ContainSubstring(e.token), gomega.ContainSubstring(base64.StdEncoding.EncodeToString([]byte(e.token)))),
		"no import token in the SyncSet, plain or encoded")
	e.g.Expect(ss.GetManagedFields()).To(gomega.ContainElement(gomega.And(
		gomega.HaveField("Manager", syncset.DefaultHiveConfig().FieldManager), gomega.HaveField("Operation", metav1.ManagedFieldsOperationApply))))

	source, err := e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, e.sourceSecretName(reg))
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(source.GetLabels()).To(gomega.And(gomega.HaveKeyWithValue(fleet.LabelRegistrationID, reg.ID), gomega.HaveKeyWithValue(fleet.LabelManagedBy, hiveManagedByFleet)))
	e.g.Expect(source.Object).To(gomega.HaveKeyWithValue("type", "Opaque"))
	token, _, _ := unstructured.NestedString(source.Object, "data", "token")
	e.g.Expect(base64.StdEncoding.DecodeString(token)).To(gomega.Equal([]byte(e.token)))
}

func TestHiveResyncWritesNothing(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	e.deliver(reg)
	ss, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	source, err := e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, e.sourceSecretName(reg))
	e.g.Expect(err).NotTo(gomega.HaveOccurred())

	e.deliver(reg)
	again, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(again.GetResourceVersion()).To(gomega.Equal(ss.GetResourceVersion()), "an unchanged registration writes no SyncSet")
	e.g.Expect(again.GetGeneration()).To(gomega.Equal(ss.GetGeneration()))
	sourceAgain, err := e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, e.sourceSecretName(reg))
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(sourceAgain.GetResourceVersion()).To(gomega.Equal(source.GetResourceVersion()), "an unchanged registration writes no source Secret")
}

func TestHiveDeliverFollowsChanges(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	e.runHive(t)
	reg := hiveRegistration(t)
	mcName := fleet.ManagedClusterName(reg)
	e.deliver(reg)
	e.g.Eventually(func() (*unstructured.Unstructured, error) {
		return e.get(hiveSecretsGVR, mcName, fleet.AutoImportSecretName)
	}).
		Should(gomega.WithTransform(func(s *unstructured.Unstructured) map[string]string { return s.GetLabels() },
			gomega.HaveKeyWithValue(hivetest.ManagedLabel, "true")), "Hive copies the mapped Secret to the hub")
	first, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())

	reg.Labels = map[string]string{"env": "prod"}
	e.deliver(reg)
	changed, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(changed.GetGeneration()).To(gomega.BeNumerically(">", first.GetGeneration()))
	e.g.Eventually(func() (map[string]string, error) {
		mc, err := e.get(hiveManagedClustersGVR, "", mcName)
		if err != nil {
			return nil, err
		}
		return mc.GetLabels(), nil
	}).Should(gomega.HaveKeyWithValue("env", "prod"), "Hive applies the changed ManagedCluster")

	e.src.setImports(nil)
	e.deliver(reg)
	dropped, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(hiveField(dropped, "spec", "secretMappings")).To(gomega.BeNil(), "no Secret, no mapping")
	_, err = e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, e.sourceSecretName(reg))
	e.g.Expect(err).To(hiveNotFound(), "the source Secret goes with its mapping")
	e.g.Eventually(func() error { _, err := e.get(hiveSecretsGVR, mcName, fleet.AutoImportSecretName); return err }).
		Should(hiveNotFound(), "in Sync mode Hive deletes the Secret the SyncSet stopped mapping")
}

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
	hivetest.InstallCRD(t.Context(), t, e.dyn)
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
	hivetest.InstallCRD(t.Context(), t, e.dyn)
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

// hiveKubeconfig writes a kubeconfig for server with the given user.
func hiveKubeconfig(t *testing.T, server string, user *clientcmdapi.AuthInfo) string {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hive"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["hive-admin"] = user
	cfg.Contexts["hive"] = &clientcmdapi.Context{Cluster: "hive", AuthInfo: "hive-admin"}
	cfg.CurrentContext = "hive"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatalf("clientcmd.Write: %v", err)
	}
	return string(b)
}

func TestHiveBadHubOrObjectsIsDeliveryFailed(t *testing.T) {
	t.Parallel()
	server := "https://127.0.0.1:1"
	good := hiveKubeconfig(t, server, &clientcmdapi.AuthInfo{Token: "t"})
	tests := []struct {
		name    string
		noHive  bool
		creds   map[string]string
		objects []map[string]any
		want    string
	}{
		{name: "no Hive target", noHive: true, creds: map[string]string{"kubeconfig": good}, want: "no Hive target"},
		{name: "no kubeconfig", creds: map[string]string{}, want: "no kubeconfig credential"},
		{name: "not a kubeconfig", creds: map[string]string{"kubeconfig": "{{{ not yaml"}, want: "cannot be read"},
		{name: "empty kubeconfig", creds: map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\n"}, want: "not usable"},
		{name: "exec plugin", creds: map[string]string{"kubeconfig": hiveKubeconfig(t, server, &clientcmdapi.AuthInfo{
			Exec: &clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}})}, want: "exec plugin"},
		{name: "token file", creds: map[string]string{"kubeconfig": hiveKubeconfig(t, server, &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/token"})}, want: "refers to files"},
		{name: "Secret without namespace", creds: map[string]string{"kubeconfig": good},
			objects: []map[string]any{{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}}, want: "without a namespace"},
		{name: "object without name", creds: map[string]string{"kubeconfig": good},
			objects: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}}, want: "without a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			src := &hiveFakeSource{creds: tt.creds, objects: tt.objects}
			d := syncset.NewHiveDelivery(syncset.DefaultHiveConfig(), src, nil, nil)
			hub := fleet.Hub{ID: "h1", Name: "hive-hub", DeliveryMode: fleet.DeliverySyncSetHive, Hive: &fleet.HiveTarget{Namespace: "ns", ClusterDeployment: "cd"}}
			if tt.noHive {
				hub.Hive = nil
			}
			reg := fleet.Registration{ID: "0f8b5b52-54c5-4c3c-8a3e-1b7d8a2f6c11", OrgID: "o", Name: "c"}
			steps := map[string]func(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error){
				"Deliver": d.Deliver, "Withdraw": d.Withdraw, "Release": d.Release}
			if tt.objects != nil {
				steps = map[string]func(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error){"Deliver": d.Deliver}
			}
			for step, call := range steps {
				report, err := call(t.Context(), hub, reg)
				g.Expect(err).NotTo(gomega.HaveOccurred(), "%s: not retried", step)
				g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeFalse()), gomega.HaveField("Reason", fleet.ReasonDeliveryFailed),
					gomega.HaveField("NoAgent", gomega.BeTrue()), gomega.HaveField("Message", gomega.ContainSubstring(tt.want))), step)
				g.Expect(report.Message).NotTo(gomega.ContainSubstring(`token: t`), "%s: no credential in the message", step)
			}
		})
	}
}

func TestHiveUnreachableIsAPIError(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	addr := ln.Addr().String()
	g.Expect(ln.Close()).To(gomega.Succeed())
	src := &hiveFakeSource{creds: map[string]string{"kubeconfig": hiveKubeconfig(t, "https://"+addr, &clientcmdapi.AuthInfo{Token: "t"})}}
	registry := prometheus.NewRegistry()
	metrics, err := syncset.NewMetrics("fleet_manager", registry)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg := syncset.DefaultHiveConfig()
	cfg.Timeout = 5 * time.Second
	d := syncset.NewHiveDelivery(cfg, src, metrics, nil)
	hub := fleet.Hub{ID: "h1", Name: "hive-hub", DeliveryMode: fleet.DeliverySyncSetHive, Hive: &fleet.HiveTarget{Namespace: "ns", ClusterDeployment: "cd"}}
	reg := hiveRegistration(t)

	report, err := d.Deliver(t.Context(), hub, reg)
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(report).To(gomega.And(gomega.HaveField("Done", gomega.BeFalse()), gomega.HaveField("Reason", fleet.ReasonSyncSetAPIError), gomega.HaveField("NoAgent", gomega.BeTrue())))
	var apiErr *syncset.APIError
	g.Expect(errors.As(err, &apiErr)).To(gomega.BeTrue(), "%v is an APIError", err)
	g.Expect(apiErr).To(gomega.And(gomega.HaveField("Mode", fleet.DeliverySyncSetHive), gomega.HaveField("Op", syncset.OpApply), gomega.HaveField("Status", 0)))
	g.Expect(apiErr.Retryable()).To(gomega.BeTrue())
	g.Expect(testutil.GatherAndCompare(registry, strings.NewReader(`
# HELP fleet_manager_syncset_api_calls_total SyncSet API calls, by delivery mode, operation and outcome.
# TYPE fleet_manager_syncset_api_calls_total counter
fleet_manager_syncset_api_calls_total{mode="syncset-hive",operation="apply",outcome="unreachable"} 1
`), hiveCallsMetric)).To(gomega.Succeed())

	report, err = d.Withdraw(t.Context(), hub, reg)
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonSyncSetAPIError))
	g.Expect(errors.As(err, &apiErr)).To(gomega.BeTrue())
	g.Expect(apiErr.Op).To(gomega.Equal(syncset.OpDelete))
}

func TestHiveMetrics(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	e.deliver(reg)
	e.deliver(reg)
	report, err := e.delivery.Withdraw(t.Context(), e.fleetHub, reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	e.g.Expect(report.Done).To(gomega.BeTrue())
	// Each Deliver: apply the source Secret and the SyncSet, list the source
	// Secrets. Withdraw: delete the SyncSet, list and delete the source
	// Secret, get the SyncSet (gone) and the ClusterSync (none).
	e.g.Expect(testutil.GatherAndCompare(e.registry, strings.NewReader(`
# HELP fleet_manager_syncset_api_calls_total SyncSet API calls, by delivery mode, operation and outcome.
# TYPE fleet_manager_syncset_api_calls_total counter
fleet_manager_syncset_api_calls_total{mode="syncset-hive",operation="apply",outcome="success"} 4
fleet_manager_syncset_api_calls_total{mode="syncset-hive",operation="delete",outcome="success"} 2
fleet_manager_syncset_api_calls_total{mode="syncset-hive",operation="get",outcome="not_found"} 2
fleet_manager_syncset_api_calls_total{mode="syncset-hive",operation="get",outcome="success"} 3
`), hiveCallsMetric)).To(gomega.Succeed())
	families, err := e.registry.Gather()
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	var applies uint64
	for _, f := range families {
		if f.GetName() == hiveApplyDurationMetric {
			for _, m := range f.GetMetric() {
				applies += m.GetHistogram().GetSampleCount()
			}
		}
	}
	e.g.Expect(applies).To(gomega.Equal(uint64(2)), "one apply duration per Deliver")
}

func TestHiveLongSecretName(t *testing.T) {
	t.Parallel()
	e := hiveNewEnv(t)
	reg := hiveRegistration(t)
	long := strings.Repeat("s", 250)
	e.src.objects = []map[string]any{{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": long, "namespace": "target"},
		"stringData": map[string]any{"k": "v"}}}
	e.deliver(reg)
	ss, err := e.syncSet(reg)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
	mappings, _, _ := unstructured.NestedSlice(ss.Object, "spec", "secretMappings")
	e.g.Expect(mappings).To(gomega.HaveLen(1))
	source, _, _ := unstructured.NestedString(mappings[0].(map[string]any), "sourceRef", "name")
	e.g.Expect(len(source)).To(gomega.BeNumerically("<=", 253))
	e.g.Expect(source).To(gomega.HavePrefix(fleet.SyncSetName(reg) + "-sss"))
	e.g.Expect(mappings[0]).To(gomega.HaveKeyWithValue("targetRef", gomega.HaveKeyWithValue("name", long)))
	_, err = e.get(hiveSecretsGVR, e.fleetHub.Hive.Namespace, source)
	e.g.Expect(err).NotTo(gomega.HaveOccurred())
}

func TestHiveConfig(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	cfg := syncset.DefaultHiveConfig()
	g.Expect(cfg.Validate()).To(gomega.Succeed())
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	g.Expect(fs.Parse([]string{"--hive-field-manager=fm", "--hive-timeout=5s", "--hive-qps=7.5", "--hive-burst=9"})).To(gomega.Succeed())
	g.Expect(cfg).To(gomega.Equal(syncset.HiveConfig{FieldManager: "fm", Timeout: 5 * time.Second, QPS: 7.5, Burst: 9}))
	g.Expect(cfg.Validate()).To(gomega.Succeed())

	bad := syncset.HiveConfig{FieldManager: "", Timeout: 0, QPS: 0, Burst: 0}
	err := bad.Validate()
	g.Expect(err).To(gomega.HaveOccurred())
	for _, flag := range []string{"--hive-field-manager", "--hive-timeout", "--hive-qps", "--hive-burst"} {
		g.Expect(err.Error()).To(gomega.ContainSubstring(flag))
	}
}
