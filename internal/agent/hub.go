package agent

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// The hub resources the agent reads or removes by name.
var (
	managedClusterGVR = hubkind.ManagedCluster.GVR()
	namespaceGVR      = hubkind.Namespace.GVR()
	// A capacity pool's cluster: what the agent removes of it beyond the
	// namespace's contents.
	clusterDeploymentGVR = hubkind.ClusterDeployment.GVR()
	clusterImageSetGVR   = hubkind.ClusterImageSet.GVR()
	machinePoolGVR       = hubkind.MachinePool.GVR()
	secretGVR            = hubkind.Secret.GVR()
)

// Hub is the agent's access to the hub's API server: a dynamic client, and a
// REST mapper built from discovery that forgets what it knows when a kind is
// not found (the hub's CRDs may be installed after the agent started).
type Hub struct {
	Dynamic dynamic.Interface
	Mapper  meta.ResettableRESTMapper
	// Leases holds the lease that lets one agent of the hub act at a time.
	Leases coordinationv1.LeasesGetter
}

// HubRESTConfig returns the configuration that reaches the hub: from the
// kubeconfig file, or in-cluster when it is empty.
func HubRESTConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("HubRESTConfig(%q): %w", kubeconfig, err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// NewHub returns the clients of the hub reached by cfg. The default client
// rate (5 requests/s) would make a hub of thousands of registrations take
// minutes to apply; the agent's own pace is bounded by its loops.
func NewHub(cfg *rest.Config) (*Hub, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("NewHub: discovery: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("NewHub: dynamic client: %w", err)
	}
	leases, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("NewHub: coordination client: %w", err)
	}
	return &Hub{Dynamic: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), Leases: leases}, nil
}

// inClusterNamespaceFile holds the namespace of the pod's service account.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// HubNamespace returns the namespace the agent runs in, the default of
// --lease-namespace: the pod's in-cluster (kubeconfig empty), else the
// kubeconfig context's, else "default".
func HubNamespace(kubeconfig string) string {
	if kubeconfig == "" {
		if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b))
		}
		return metav1.NamespaceDefault
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil || ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}
