// Package governancetest runs the governance policy framework's hub
// component, the upstream governance-policy-propagator, beside the test hub
// and OCM's hub controllers (internal/hub/ocmtest): it replicates each root
// Policy that a PlacementBinding ties to a Placement into the namespace of
// every cluster of the Placement's PlacementDecisions, keeps the replicas in
// step with the root policy, removes them when a cluster leaves the decision,
// and aggregates the replicas' compliance into the root policy's status. The
// program is the one open-cluster-management.io/governance-policy-propagator
// builds at Version, which scripts/governance/build-propagator.sh builds into
// $GOVERNANCE_BIN_DIR, else governance-<Version> in the cache folder
// ($FLEET_MANAGER_CACHE or ~/.cache/fleet-manager); make test/binaries runs
// it.
//
//	func TestMain(m *testing.M) { governancetest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		gov := governancetest.Start(t) // the hub, OCM's hub controllers, the propagator
//		cluster := gov.OCM().Join(t, name)
//		...
//	}
//
// The propagator starts once per test binary; Main stops it, OCM's
// controllers and the hub.
//
// Not run here: the framework's managed-cluster side (the
// governance-policy-framework-addon's spec-sync, template-sync and
// status-sync, and the config-policy-controller), because the Go module
// proxy refuses every version of the addon's module this project tried.
// What status-sync writes back, a replicated policy's status, a test writes
// itself (see SetReplicatedCompliance). The propagator runs as the hub's
// admin, without its validating webhook (it would need a serving
// certificate the API server trusts) and without leader election.
package governancetest

import (
	"embed"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
)

const (
	// Version is the open-cluster-management.io/governance-policy-propagator
	// release the program is built from; scripts/governance/build-propagator.sh
	// pins the same, and scripts/crds.sh copies the Policy CRDs of it.
	Version = "v0.19.0"
	// BinDirEnv names the environment variable that holds the folder with
	// the governance-policy-propagator binary.
	BinDirEnv = "GOVERNANCE_BIN_DIR"

	binaryName    = "governance-policy-propagator"
	startAttempts = 3
	stopGrace     = 10 * time.Second
	readyTimeout  = 2 * time.Minute
)

// crdFiles are the kinds the propagator watches that hubtest does not
// install (PolicySet, PolicyAutomation): unmodified files of the propagator's
// module at Version, which scripts/crds.sh copies and checks.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

// Hub is the test hub with OCM's hub controllers and the propagator.
type Hub struct {
	ocm     *ocmtest.Hub
	dir     string
	proc    *childproc.Process
	timings time.Duration
}

var shared childproc.Shared[Hub]

// Start returns the hub with OCM's hub controllers and the propagator,
// starting them on the first call of the test binary. It fails the test when
// they cannot start (say the binary is missing); it never skips.
func Start(t testing.TB) *Hub {
	t.Helper()
	ocm := ocmtest.Start(t)
	return shared.Get(t, "governancetest.Start", func() (*Hub, error) { return start(ocm) }, func(h *Hub) {
		t.Logf("governancetest: governance-policy-propagator %s started in %s", Version, h.timings.Round(time.Millisecond))
	})
}

// Main runs the tests and then stops the propagator, OCM's controllers and
// the hub; call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	ocmtest.Stop()
	hubtest.Stop()
	os.Exit(code)
}

// Stop stops the propagator of this test binary; tests that call Start
// afterwards fail. Main calls it; a TestMain of its own calls it before
// ocmtest.Stop.
func Stop() {
	shared.Stop((*Hub).stop)
}

// OCM returns OCM's hub controllers, to join managed clusters with.
func (h *Hub) OCM() *ocmtest.Hub { return h.ocm }

// Hub returns the test hub.
func (h *Hub) Hub() *hubtest.Hub { return h.ocm.Hub() }

// Err returns an error naming the propagator or an OCM hub controller that
// has exited, with the end of its log, or nil while all run.
func (h *Hub) Err() error {
	if err := h.proc.Exited(); err != nil {
		return err
	}
	return h.ocm.Err()
}

// LogTail returns the end of the propagator's log, for a failed test.
func (h *Hub) LogTail(n int) string { return h.proc.LogTail(n) }

func start(ocm *ocmtest.Hub) (_ *Hub, err error) {
	began := time.Now()
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	h := &Hub{ocm: ocm}
	if h.dir, err = os.MkdirTemp("", "governancetest-"); err != nil {
		return nil, fmt.Errorf("governancetest: %w", err)
	}
	defer func() {
		if err != nil {
			h.stop()
		}
	}()
	config := ocm.Hub().RESTConfig()
	if err := installCRDs(config); err != nil {
		return nil, err
	}
	admin := filepath.Join(h.dir, "hub.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: config.Host, CertificateAuthorityData: config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: config.BearerToken}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	cfg.CurrentContext = "default"
	if err := clientcmd.WriteToFile(*cfg, admin); err != nil {
		return nil, fmt.Errorf("governancetest: %w", err)
	}
	if h.proc, err = startPropagator(bin, admin, filepath.Join(h.dir, binaryName+".log")); err != nil {
		return nil, err
	}
	h.timings = time.Since(began)
	return h, nil
}

func (h *Hub) stop() {
	h.proc.Stop(stopGrace)
	os.RemoveAll(h.dir)
}

// startPropagator starts the propagator with a health port of its own and
// waits until its manager serves readyz; another program that took the port
// first costs another try.
func startPropagator(bin, kubeconfig, logPath string) (*childproc.Process, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	// WATCH_NAMESPACE must be set; empty watches every namespace, as the
	// propagator runs on an RHACM hub.
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "WATCH_NAMESPACE=")
	p, err := childproc.StartOnFreePorts(startAttempts, stopGrace, func() (*childproc.Process, error) {
		ports, err := childproc.FreePorts(1)
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := childproc.Start(childproc.Options{Name: binaryName, LogPath: logPath, Env: env}, bin,
			"--leader-elect=false", "--enable-webhooks=false",
			"--metrics-bind-address=0", "--health-probe-bind-address="+addr)
		if err != nil {
			return nil, err
		}
		return p, p.WaitReady(readyTimeout, func() error {
			resp, err := client.Get("http://" + addr + "/readyz")
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("readyz answered %s", resp.Status)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("governancetest: %w", err)
	}
	return p, nil
}

// installCRDs installs the embedded CRDs and waits until they are served.
func installCRDs(config *rest.Config) error {
	if err := hubtest.InstallCRDFiles(config, crdFiles, "crds/*.yaml"); err != nil {
		return fmt.Errorf("governancetest: %w", err)
	}
	return nil
}

func findBinary() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		var err error
		if dir, err = childproc.CachePath("governance-" + Version); err != nil {
			return "", fmt.Errorf("governancetest: %w, or %s", err, BinDirEnv)
		}
	}
	bin := filepath.Join(dir, binaryName)
	info, err := os.Stat(bin)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("governancetest: no executable %s: run make test/binaries (scripts/governance/build-propagator.sh builds governance-policy-propagator %s into %s; %s chooses the folder)",
			bin, Version, dir, BinDirEnv)
	}
	return bin, nil
}
