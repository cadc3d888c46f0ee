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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	mu     sync.Mutex
	procs  []program
	cancel context.CancelFunc
	done   chan struct{}
	// workErr is why the work agent could not start, if it could not.
	workErr error
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
	cp, err := hubtest.StartControlPlane()
	if err != nil {
		t.Fatalf("ocmtest.Join(%s): %v", name, err)
	}
	c := &Cluster{name: name, cp: cp, dir: filepath.Join(cp.Dir(), "klusterlet")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ocmtest: cluster %s:\n%s%s", name, c.logTails(40), h.logTails(40))
		}
		c.stop()
	})
	if err := c.start(h); err != nil {
		t.Fatalf("ocmtest.Join(%s): %v", name, err)
	}
	t.Logf("ocmtest: managed cluster %s at %s and its registration agent started in %s",
		name, cp.RESTConfig().Host, time.Since(began).Round(time.Millisecond))
	return c
}

func (c *Cluster) start(h *Hub) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	config := c.cp.RESTConfig()
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
		append([]string{"agent", "--bootstrap-kubeconfig=" + bootstrap, "--hub-kubeconfig-dir=" + hubDir}, common...))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, program{"registration-agent", reg})

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
	c.cp.Stop()
}
