package syncset_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/hivetest"
)

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
