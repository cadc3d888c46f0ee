package syncset_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/hivetest"
)

var (
	hiveSecretsGVR          = hubkind.Secret.GVR()
	hiveNamespacesGVR       = hubkind.Namespace.GVR()
	hiveManagedClustersGVR  = hubkind.ManagedCluster.GVR()
	hiveAddonConfigsGVR     = hubkind.KlusterletAddonConfig.GVR()
	hiveSyncSetAPIVersion   = hubkind.SyncSet.APIVersion()
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
	return e.get(hubkind.SyncSet.GVR(), e.fleetHub.Hive.Namespace, fleet.SyncSetName(reg))
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
