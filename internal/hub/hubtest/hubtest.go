// Package hubtest runs a real hub for tests: controller-runtime's envtest
// starts an etcd and a kube-apiserver on loopback ports, and every hub CRD
// (CRDs: upstream files embedded from crds/) is installed and established. The hub starts once per
// test binary, on the first Start, and all tests of the package share it
// (t.Parallel is fine; give objects distinct names). Main stops it when the
// tests are done:
//
//	func TestMain(m *testing.M) { hubtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		hub := hubtest.Start(t)
//		clients := hub.NewClientsetFor(t)
//		...
//	}
//
// The binaries come from $HUB_BIN_DIR, else $KUBEBUILDER_ASSETS, else
// hub-bin in the cache folder ($FLEET_MANAGER_CACHE or
// ~/.cache/fleet-manager), which make test/binaries fills; envtest
// never downloads any. There is no kube-controller-manager: no garbage
// collection, no namespace deletion, no service-account tokens.
package hubtest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// BinDirEnv names the environment variable that holds the folder with the
// etcd and kube-apiserver binaries.
const BinDirEnv = "HUB_BIN_DIR"

// Hub is a running etcd plus kube-apiserver with the hub CRDs installed. It
// is shared by the tests of a package: don't change what others rely on.
type Hub struct {
	env     *envtest.Environment
	dir     string // the token file, the logs and the wrappers of the binaries
	config  *rest.Config
	crds    []string
	timings Timings
}

// Timings says how long each part of the hub start took.
type Timings struct {
	ControlPlane time.Duration // until etcd and kube-apiserver answered
	CRDs         time.Duration // until every CRD was Established
	Total        time.Duration
}

// shared holds the one hub of the test binary.
var shared childproc.Shared[Hub]

// Start returns the hub of this test binary, starting it on the first call.
// It fails the test when the hub cannot start, for instance when the
// binaries are missing; it never skips.
func Start(t testing.TB) *Hub {
	t.Helper()
	return shared.Get(t, "hubtest.Start", start, func(hub *Hub) {
		tm := hub.timings
		t.Logf("hubtest: hub at %s started in %s (etcd and kube-apiserver %s, %d CRDs %s)",
			hub.config.Host, tm.Total.Round(time.Millisecond), tm.ControlPlane.Round(time.Millisecond),
			len(hub.crds), tm.CRDs.Round(time.Millisecond))
	})
}

// Main runs the tests and then stops the hub, if one was started; call it
// from TestMain. A package that needs more than one such helper calls
// m.Run itself and then Stop.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the hub of this test binary and removes its files. Tests that
// call Start afterwards fail.
func Stop() {
	shared.Stop((*Hub).stop)
}

// Dynamic starts the hub if needed and returns a dynamic client for it.
func Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	return Start(t).NewDynamicFor(t)
}

// start brings up the control plane and installs the CRDs. On error nothing
// is left running.
func start() (_ *Hub, err error) {
	began := time.Now()
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	hub := &Hub{}
	if hub.dir, err = os.MkdirTemp("", "hubtest-"); err != nil {
		return nil, fmt.Errorf("hubtest: %w", err)
	}
	defer func() {
		if err != nil {
			hub.stop()
		}
	}()
	var token string
	cpBegan := time.Now()
	if hub.env, token, err = startEnvironment(bins, hub.dir); err != nil {
		return nil, fmt.Errorf("hubtest: %w", err)
	}
	hub.timings.ControlPlane = time.Since(cpBegan)
	hub.config = &rest.Config{
		Host:            hub.env.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: hub.env.Config.CAData},
		QPS:             100,
		Burst:           200,
		UserAgent:       "hubtest",
	}
	// The upstream CRDs draw schema warnings (unknown formats) that say
	// nothing about the code under test.
	installConfig := rest.CopyConfig(hub.config)
	installConfig.WarningHandler = rest.NoWarnings{}
	crdsBegan := time.Now()
	if hub.crds, err = installCRDs(context.Background(), installConfig, crds); err != nil {
		return nil, fmt.Errorf("hubtest: %w", err)
	}
	hub.timings.CRDs = time.Since(crdsBegan)
	hub.timings.Total = time.Since(began)
	return hub, nil
}

// stop ends the control plane and removes its files.
func (h *Hub) stop() {
	if h.env != nil {
		_ = h.env.Stop()
	}
	os.RemoveAll(h.dir)
}

// binaries are the folder and the paths of the two programs a hub runs.
type binaries struct{ dir, etcd, apiserver string }

// findBinaries looks in $HUB_BIN_DIR, $KUBEBUILDER_ASSETS or the default
// cache folder; etcd may also come from PATH (Debian's etcd-server puts it in
// /usr/bin).
func findBinaries() (binaries, error) {
	dir := cmp.Or(os.Getenv(BinDirEnv), os.Getenv("KUBEBUILDER_ASSETS"))
	if dir == "" {
		var err error
		if dir, err = childproc.CachePath("hub-bin"); err != nil {
			return binaries{}, fmt.Errorf("hubtest: %w, or %s", err, BinDirEnv)
		}
	}
	bins := binaries{dir: dir, etcd: filepath.Join(dir, "etcd"), apiserver: filepath.Join(dir, "kube-apiserver")}
	if !executable(bins.etcd) {
		if onPath, err := exec.LookPath("etcd"); err == nil {
			bins.etcd = onPath
		}
	}
	for _, bin := range []string{bins.etcd, bins.apiserver} {
		if !executable(bin) {
			return binaries{}, fmt.Errorf("hubtest: no executable %s: run make test/binaries (it installs etcd and builds kube-apiserver into %s; %s chooses the folder)",
				bin, dir, BinDirEnv)
		}
	}
	return bins, nil
}

func executable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// RESTConfig returns a copy of the admin configuration: a system:masters
// token and the CA of the apiserver's serving certificate.
func (h *Hub) RESTConfig() *rest.Config {
	return rest.CopyConfig(h.config)
}

// CRDs returns the names of the CustomResourceDefinitions Start installed.
func (h *Hub) CRDs() []string {
	return append([]string(nil), h.crds...)
}

// Timings returns how long the hub took to start.
func (h *Hub) Timings() Timings {
	return h.timings
}

// NewClientsetFor returns a typed admin client for the hub.
func (h *Hub) NewClientsetFor(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	clients, err := kubernetes.NewForConfig(h.RESTConfig())
	if err != nil {
		t.Fatalf("hubtest: kubernetes.NewForConfig: %v", err)
	}
	return clients
}

// NewDynamicFor returns a dynamic admin client for the hub.
func (h *Hub) NewDynamicFor(t testing.TB) dynamic.Interface {
	t.Helper()
	client, err := dynamic.NewForConfig(h.RESTConfig())
	if err != nil {
		t.Fatalf("hubtest: dynamic.NewForConfig: %v", err)
	}
	return client
}

// Kubeconfig writes an admin kubeconfig for the hub into t.TempDir and
// returns its path, for code under test that reads a kubeconfig file.
func (h *Hub) Kubeconfig(t testing.TB) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: h.config.Host, CertificateAuthorityData: h.config.CAData}
	cfg.AuthInfos["hubtest-admin"] = &clientcmdapi.AuthInfo{Token: h.config.BearerToken}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "hubtest-admin"}
	cfg.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("hubtest: clientcmd.WriteToFile(%s): %v", path, err)
	}
	return path
}
