package ocmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

// Cluster is a managed cluster of one test: its own etcd and kube-apiserver,
// with the klusterlet's registration agent and, once the agent holds a hub
// certificate, its work agent. The test's cleanup stops them.
type Cluster struct {
	name string
	cp   *hubtest.ControlPlane
	dir  string
	// shared is set for a cluster of JoinShared: its control plane is the
	// hub's, and it runs no work agent.
	shared bool
	// secret is the hub kubeconfig secret's name in the agents' namespace.
	secret string

	mu     sync.Mutex
	procs  []program
	cancel context.CancelFunc
	done   chan struct{}
	// workErr is why the work agent could not start, if it could not.
	workErr error
	// cpStop stops a cluster's own control plane once.
	cpStop sync.Once
}

// Join starts a managed cluster named name and its registration agent,
// bootstrapped to the hub with the bootstrap service account's token as
// `clusteradm join` does; the agent creates the ManagedCluster unless the
// test made it first. Its CSR is approved once the ManagedCluster has
// hubAcceptsClient true; then the agent gets its certificate, the work agent
// starts (as a klusterlet's work agent starts once the hub kubeconfig secret
// it mounts exists), and the registration controller and the agent take the
// cluster through Joined and Available.
func (h *Hub) Join(t testing.TB, name string) *Cluster {
	t.Helper()
	began := time.Now()
	c, err := h.JoinOwn(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ocmtest: cluster %s:\n%s%s", name, c.logTails(40), h.logTails(40))
		}
		c.stop()
	})
	t.Logf("ocmtest: managed cluster %s at %s and its registration agent started in %s",
		name, c.cp.RESTConfig().Host, time.Since(began).Round(time.Millisecond))
	return c
}

// JoinOwn is Join for code that runs outside the test's goroutine: it
// returns an error rather than failing a test, and Leave (or Stop) stops
// the cluster rather than the test's cleanup.
func (h *Hub) JoinOwn(name string) (*Cluster, error) {
	cp, err := hubtest.StartControlPlane()
	if err != nil {
		return nil, fmt.Errorf("ocmtest.Join(%s): %w", name, err)
	}
	c := &Cluster{name: name, cp: cp, dir: filepath.Join(cp.Dir(), "klusterlet"), secret: defaultHubKubeconfigSecret}
	h.track(c)
	if err := c.start(h); err != nil {
		tails := c.logTails(40)
		c.stop()
		return nil, fmt.Errorf("ocmtest.Join(%s): %w\n%s", name, err, tails)
	}
	return c, nil
}

// track records a cluster whose agents stop with the hub.
func (h *Hub) track(c *Cluster) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.joined = append(h.joined, c)
}

// JoinShared starts the registration agent of a cluster named name on the
// managed cluster that every JoinShared of the test binary shares (started
// on the first call, stopped by Stop), without a work agent. Each such
// klusterlet keeps its hub kubeconfig secret under a name of its own, so the
// agents do not meet; the ClusterClaims of the managed cluster (SetClaim)
// are every shared cluster's. It is for tests that need many joined
// clusters and apply no ManifestWork: a registration agent is one process,
// a control plane two. Leave stops the agent.
func (h *Hub) JoinShared(name string) (*Cluster, error) {
	cp, err := h.sharedManaged()
	if err != nil {
		return nil, fmt.Errorf("ocmtest.JoinShared(%s): %w", name, err)
	}
	c := &Cluster{name: name, cp: cp, dir: filepath.Join(cp.Dir(), "klusterlets", name), shared: true,
		secret: "hub-kubeconfig-" + name}
	h.track(c)
	if err := c.start(h); err != nil {
		c.StopAgents()
		return nil, fmt.Errorf("ocmtest.JoinShared(%s): %w", name, err)
	}
	return c, nil
}

// Leave stops a cluster's agents, as RHACM's import controller removes the
// klusterlet when the ManagedCluster is deleted: a cluster of JoinOwn stops
// with its control plane; a shared one's hub kubeconfig secret is deleted,
// so that a cluster joining again under the same name bootstraps anew.
// Calling it again does nothing.
func (c *Cluster) Leave() {
	if !c.shared {
		c.stop()
		return
	}
	c.StopAgents()
	kube, err := kubernetes.NewForConfig(c.cp.RESTConfig())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	_ = kube.CoreV1().Secrets(agentNamespace).Delete(ctx, c.secret, metav1.DeleteOptions{})
	_ = os.RemoveAll(c.dir)
}

// SetClaim sets a ClusterClaim on the managed cluster JoinShared's clusters
// share, as a cluster's own tooling does (OpenShift's version claim is
// RHACM's klusterlet add-on's); each shared agent reports it.
func (h *Hub) SetClaim(name, value string) error {
	cp, err := h.sharedManaged()
	if err != nil {
		return err
	}
	return setClaim(cp.RESTConfig(), name, value)
}

// SetClaim sets a ClusterClaim on the cluster's API server, which its
// registration agent reports; on a shared cluster, every shared cluster
// reports it.
func (c *Cluster) SetClaim(name, value string) error {
	return setClaim(c.cp.RESTConfig(), name, value)
}

// AddNode creates a Node with the capacity and allocatable resources
// given on the cluster's API server, as a kubelet registers its node (no
// kubelet runs here); the registration agent reports the nodes' sums as the
// ManagedCluster's capacity and allocatable.
func (c *Cluster) AddNode(name string, capacity, allocatable corev1.ResourceList) error {
	kube, err := kubernetes.NewForConfig(c.cp.RESTConfig())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, allocatable
	_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func setClaim(config *rest.Config, name, value string) error {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"value": value},
	}}
	claims := dyn.Resource(schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1alpha1", Resource: "clusterclaims"})
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		existing, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		existing.Object["spec"] = claim.Object["spec"]
		_, err = claims.Update(ctx, existing, metav1.UpdateOptions{})
		return err
	} else if err != nil {
		return err
	}
	return nil
}

// sharedManaged returns the managed cluster of JoinShared, starting it
// with the klusterlet's CRDs and namespace on the first call.
func (h *Hub) sharedManaged() (*hubtest.ControlPlane, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.managed != nil || h.managedErr != nil {
		return h.managed, h.managedErr
	}
	cp, err := hubtest.StartControlPlane()
	if err == nil {
		if err = prepareManaged(cp.RESTConfig()); err != nil {
			cp.Stop()
		}
	}
	if err != nil {
		h.managedErr = fmt.Errorf("the shared managed cluster: %w", err)
		return nil, h.managedErr
	}
	h.managed = cp
	return cp, nil
}

// prepareManaged installs the klusterlet's CRDs on a managed cluster and
// makes the agents' namespace.
func prepareManaged(config *rest.Config) error {
	if err := installCRDs(config, "crds/managed"); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", agentNamespace, err)
	}
	return nil
}

func (c *Cluster) start(h *Hub) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	config := c.cp.RESTConfig()
	if !c.shared {
		if err := prepareManaged(config); err != nil {
			return err
		}
	}
	managed := filepath.Join(c.dir, "managed.kubeconfig")
	bootstrap := filepath.Join(c.dir, "bootstrap.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig(config.Host, config.CAData, &clientcmdapi.AuthInfo{Token: config.BearerToken}), managed); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*h.bootstrap, bootstrap); err != nil {
		return err
	}
	hubDir := filepath.Join(c.dir, "hub-kubeconfig")
	common := []string{
		"--spoke-cluster-name=" + c.name, "--kubeconfig=" + managed,
		"--disable-leader-election", "--namespace=" + agentNamespace,
	}
	reg, err := startProgram("registration-agent", filepath.Join(c.dir, "registration-agent.log"), h.bins.registration,
		append([]string{"agent", "--bootstrap-kubeconfig=" + bootstrap, "--hub-kubeconfig-dir=" + hubDir,
			"--hub-kubeconfig-secret=" + c.secret}, common...))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, program{"registration-agent", reg})
	if c.shared {
		return nil
	}

	workCtx, stopWork := context.WithCancel(context.Background())
	c.cancel, c.done = stopWork, make(chan struct{})
	go func() {
		defer close(c.done)
		// The registration agent writes the hub kubeconfig secret's keys
		// into hubDir; the certificate is the last to exist.
		hubKubeconfig := filepath.Join(hubDir, "kubeconfig")
		if err := poll(workCtx, 100*time.Millisecond, func() error {
			for _, f := range []string{"kubeconfig", "tls.crt", "tls.key"} {
				if _, err := os.Stat(filepath.Join(hubDir, f)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return // stopped before the cluster was accepted
		}
		work, err := startProgram("work-agent", filepath.Join(c.dir, "work-agent.log"), h.bins.work,
			append([]string{"agent", "--hub-kubeconfig=" + hubKubeconfig, "--workload-source-config=" + hubKubeconfig,
				"--status-sync-interval=2s"}, common...))
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.workErr = err
			return
		}
		if workCtx.Err() != nil {
			work.Stop(stopGrace)
			return
		}
		c.procs = append(c.procs, program{"work-agent", work})
	}()
	return nil
}

// Name returns the cluster's name.
func (c *Cluster) Name() string { return c.name }

// RESTConfig returns an admin configuration for the managed cluster.
func (c *Cluster) RESTConfig() *rest.Config { return c.cp.RESTConfig() }

// Err returns an error naming an agent that has exited or could not start,
// with the end of its log, or nil while they run.
func (c *Cluster) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.workErr != nil {
		return c.workErr
	}
	for _, p := range c.procs {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

// LogTails returns the end of each of the cluster's agents' logs, for a
// failed test.
func (c *Cluster) LogTails(n int) string { return c.logTails(n) }

func (c *Cluster) logTails(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "--- end of the %s's log:\n%s\n", p.name, p.LogTail(n))
	}
	return b.String()
}

// StopAgents stops the cluster's registration and work agents and leaves
// its API server running: the klusterlet removed from the cluster, as
// RHACM's import controller removes it when the ManagedCluster is deleted.
// Err names them as exited afterwards; calling it again does nothing.
func (c *Cluster) StopAgents() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(stopGrace)
	}
}

func (c *Cluster) stop() {
	c.StopAgents()
	if !c.shared {
		c.cpStop.Do(c.cp.Stop)
	}
}
