// Package ocmtest runs upstream open-cluster-management (OCM) beside the test
// hub: its hub controllers (the registration controller, the placement
// controller and the work manager) against hubtest's hub, and for each test
// cluster a managed cluster of its own (a second etcd and kube-apiserver)
// with the klusterlet's registration agent and work agent, bootstrapped to
// the hub as `clusteradm join` does. The programs are the ones
// open-cluster-management.io/ocm builds (cmd/registration, cmd/placement,
// cmd/work, at Version), which scripts/ocm/build-ocm.sh builds into
// $OCM_BIN_DIR, else ocm-<Version> in the cache folder ($FLEET_MANAGER_CACHE
// or ~/.cache/fleet-manager); make test/binaries runs it.
//
//	func TestMain(m *testing.M) { ocmtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		ocm := ocmtest.Start(t)      // the hub, with OCM's hub controllers
//		// create the ManagedCluster with hubAcceptsClient true, as an import does
//		cluster := ocm.Join(t, name) // a managed cluster and its agents
//		...
//	}
//
// The hub controllers start once per test binary, on the hub all the
// package's tests share; Main stops them and the hub.
//
// What is not OCM's is played here, in signer.go: approving a cluster's
// first certificate signing request once its ManagedCluster is accepted (what
// `clusteradm accept` or RHACM's import controller does), and signing
// approved kubernetes.io/kube-apiserver-client requests (what
// kube-controller-manager's csrsigning controller does; the test hub runs no
// kube-controller-manager and kube-apiserver signs nothing), with a CA the
// hub trusts through hubtest's Hub.TrustClientCA. The hub controllers run as
// the hub's admin, not with the cluster-manager's narrower roles. The agents
// reach the hub as in a cluster, with the bootstrap service account's token
// and then with the certificate their CSR got them; on the managed cluster
// they are its admin, close to what the klusterlet's roles grant them.
package ocmtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"embed"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

const (
	// Version is the open-cluster-management.io/ocm release the programs
	// are built from; scripts/ocm/build-ocm.sh pins the same.
	Version = "v1.0.0"
	// BinDirEnv names the environment variable that holds the folder with
	// the registration, placement and work binaries.
	BinDirEnv = "OCM_BIN_DIR"

	// The bootstrap identity `clusteradm init` makes on a hub.
	bootstrapNamespace = "open-cluster-management"
	bootstrapAccount   = "cluster-bootstrap"
	bootstrapRole      = "open-cluster-management:bootstrap"
	// hubNamespace is where the hub controllers say they run: it holds
	// their events.
	hubNamespace = "open-cluster-management-hub"
	// agentNamespace is the klusterlet agents' namespace on a managed
	// cluster; the agents have no flag for it outside a pod.
	agentNamespace = "open-cluster-management-agent"
	// defaultHubKubeconfigSecret is the registration agent's default name
	// for the secret that holds its hub kubeconfig.
	defaultHubKubeconfigSecret = "hub-kubeconfig-secret"

	startAttempts = 3
	stopGrace     = 10 * time.Second
	readyTimeout  = 2 * time.Minute
)

// crdFiles are the CRDs OCM's programs watch that hubtest does not install
// (hub/) and those of a managed cluster (managed/): unmodified files of the
// ocm module at Version, which scripts/crds.sh copies and checks.
//
//go:embed crds/hub/*.yaml crds/managed/*.yaml
var crdFiles embed.FS

// program is a running OCM program and its name.
type program struct {
	name string
	*childproc.Process
}

// Hub is the test hub with OCM's hub controllers running against it.
type Hub struct {
	hub       *hubtest.Hub
	bins      binaries
	dir       string
	bootstrap *clientcmdapi.Config // the hub, as the bootstrap service account
	procs     []program
	stopCSRs  context.CancelFunc
	csrsDone  chan struct{}
	timings   time.Duration

	mu sync.Mutex
	// managed is JoinShared's managed cluster, once started; managedErr is
	// why it could not start.
	managed    *hubtest.ControlPlane
	managedErr error
	// joined are the clusters of JoinShared and JoinOwn, which stop with
	// the hub.
	joined []*Cluster
}

var shared childproc.Shared[Hub]

// Start returns the hub with OCM's hub controllers, starting the hub and
// the controllers on the first call of the test binary. It fails the test
// when they cannot start (say the binaries are missing); it never skips.
func Start(t testing.TB) *Hub {
	t.Helper()
	hub := hubtest.Start(t)
	return shared.Get(t, "ocmtest.Start", func() (*Hub, error) { return start(hub) }, func(h *Hub) {
		t.Logf("ocmtest: OCM %s hub controllers started in %s", Version, h.timings.Round(time.Millisecond))
	})
}

// Main runs the tests and then stops the OCM controllers and the hub; call
// it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	hubtest.Stop()
	os.Exit(code)
}

// Stop stops the hub controllers of this test binary. Tests that call Start
// afterwards fail.
func Stop() {
	shared.Stop((*Hub).stop)
}

// Hub returns the test hub the controllers run against.
func (h *Hub) Hub() *hubtest.Hub { return h.hub }

// Err returns an error naming a hub controller that has exited, with the
// end of its log, or nil while all run.
func (h *Hub) Err() error {
	for _, p := range h.procs {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

func start(hub *hubtest.Hub) (_ *Hub, err error) {
	began := time.Now()
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	h := &Hub{hub: hub, bins: bins}
	if h.dir, err = os.MkdirTemp("", "ocmtest-"); err != nil {
		return nil, fmt.Errorf("ocmtest: %w", err)
	}
	defer func() {
		if err != nil {
			h.stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	config := hub.RESTConfig()
	if err := installCRDs(config, "crds/hub"); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("ocmtest: %w", err)
	}
	token, err := bootstrapToken(ctx, kube)
	if err != nil {
		return nil, err
	}
	h.bootstrap = kubeconfig(config.Host, config.CAData, &clientcmdapi.AuthInfo{Token: token})

	ca, err := newClientCA()
	if err != nil {
		return nil, err
	}
	if err := hub.TrustClientCA(ca.pem); err != nil {
		return nil, fmt.Errorf("ocmtest: %w", err)
	}
	if err := waitTrusted(ctx, config, ca); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("ocmtest: %w", err)
	}
	standIn := &csrStandIn{kube: kube, dyn: dyn, ca: ca,
		bootstrapUser: "system:serviceaccount:" + bootstrapNamespace + ":" + bootstrapAccount}
	csrCtx, stopCSRs := context.WithCancel(context.Background())
	h.stopCSRs, h.csrsDone = stopCSRs, make(chan struct{})
	go func() {
		defer close(h.csrsDone)
		standIn.run(csrCtx, 100*time.Millisecond)
	}()

	admin := filepath.Join(h.dir, "hub.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig(config.Host, config.CAData, &clientcmdapi.AuthInfo{Token: config.BearerToken}), admin); err != nil {
		return nil, fmt.Errorf("ocmtest: %w", err)
	}
	common := []string{"--kubeconfig=" + admin, "--disable-leader-election", "--namespace=" + hubNamespace}
	for _, c := range []struct{ name, bin, cmd string }{
		{"registration-controller", bins.registration, "controller"},
		{"placement-controller", bins.placement, "controller"},
		{"work-manager", bins.work, "manager"},
	} {
		p, err := startProgram(c.name, filepath.Join(h.dir, c.name+".log"), c.bin, append([]string{c.cmd}, common...))
		if err != nil {
			return nil, err
		}
		h.procs = append(h.procs, program{c.name, p})
	}
	h.timings = time.Since(began)
	return h, nil
}

func (h *Hub) stop() {
	if h.stopCSRs != nil {
		h.stopCSRs()
		<-h.csrsDone
	}
	for _, p := range h.procs {
		p.Stop(stopGrace)
	}
	h.mu.Lock()
	for _, c := range h.joined {
		c.stop()
	}
	if h.managed != nil {
		h.managed.Stop()
	}
	h.mu.Unlock()
	os.RemoveAll(h.dir)
}

// logTails returns the end of each hub controller's log, for a failed test.
func (h *Hub) logTails(n int) string {
	var b bytes.Buffer
	for _, p := range h.procs {
		fmt.Fprintf(&b, "--- end of the %s's log:\n%s\n", p.name, p.LogTail(n))
	}
	return b.String()
}

// bootstrapToken makes the bootstrap identity `clusteradm init` makes (a
// service account bound to the role of ocm's
// deploy/cluster-manager/chart/cluster-manager/templates/bootstrap_cluster_role.yaml)
// and returns a token of it, as `clusteradm get token` does.
func bootstrapToken(ctx context.Context, kube kubernetes.Interface) (string, error) {
	objects := []func() error{
		func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bootstrapNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().ServiceAccounts(bootstrapNamespace).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: bootstrapAccount}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: bootstrapRole},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
					{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
					{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "create", "list", "watch"}},
					{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersets/join"}, Verbs: []string{"create"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: bootstrapRole},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: bootstrapRole},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: bootstrapNamespace, Name: bootstrapAccount}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("ocmtest: bootstrap identity: %w", err)
		}
	}
	// Long enough for any test binary; the apiserver has no maximum.
	expiry := int64((24 * time.Hour).Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(bootstrapNamespace).CreateToken(ctx, bootstrapAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ocmtest: bootstrap token: %w", err)
	}
	return tr.Status.Token, nil
}

// waitTrusted waits until the hub's kube-apiserver has reloaded its client
// CAs and authenticates a certificate of ca.
func waitTrusted(ctx context.Context, config *rest.Config, ca *clientCA) error {
	const probeUser = "ocmtest:signer-probe"
	certPEM, keyPEM, err := ca.issueKey(probeUser, nil)
	if err != nil {
		return err
	}
	probe := rest.AnonymousClientConfig(config)
	probe.CertData, probe.KeyData = certPEM, keyPEM
	kube, err := kubernetes.NewForConfig(probe)
	if err != nil {
		return fmt.Errorf("ocmtest: %w", err)
	}
	return poll(ctx, 100*time.Millisecond, func() error {
		review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("the hub does not trust the signer's CA yet: %w", err)
		}
		if got := review.Status.UserInfo.Username; got != probeUser {
			return fmt.Errorf("the hub took the signer's certificate for %q", got)
		}
		return nil
	})
}

// poll calls check every interval until it returns nil or ctx ends; then it
// returns check's last error.
func poll(ctx context.Context, interval time.Duration, check func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ocmtest: %w (%v)", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// startProgram starts one of OCM's programs with a serving port of its own
// (library-go's controller command serves health and metrics on --listen)
// and waits until it listens; another program that took the port first
// costs another try.
func startProgram(name, logPath, bin string, args []string) (*childproc.Process, error) {
	client := &http.Client{
		Timeout: 5 * time.Second,
		// The program's serving certificate is self-signed at start: the
		// probe asks only whether it listens.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // see above
	}
	p, err := childproc.StartOnFreePorts(startAttempts, stopGrace, func() (*childproc.Process, error) {
		ports, err := childproc.FreePorts(1)
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := childproc.Start(childproc.Options{Name: name, LogPath: logPath}, bin, append(args, "--listen="+addr)...)
		if err != nil {
			return nil, err
		}
		return p, p.WaitReady(readyTimeout, func() error {
			resp, err := client.Get("https://" + addr + "/healthz")
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ocmtest: %w", err)
	}
	return p, nil
}

// kubeconfig returns a one-context kubeconfig for server.
func kubeconfig(server string, caData []byte, auth *clientcmdapi.AuthInfo) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos["user"] = auth
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "default"
	return cfg
}

// installCRDs installs the embedded CRDs of dir and waits until they are
// served.
func installCRDs(config *rest.Config, dir string) error {
	if err := hubtest.InstallCRDFiles(config, crdFiles, dir+"/*.yaml"); err != nil {
		return fmt.Errorf("ocmtest: %w", err)
	}
	return nil
}

// binaries are the paths of OCM's three programs.
type binaries struct{ registration, placement, work string }

func findBinaries() (binaries, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		var err error
		if dir, err = childproc.CachePath("ocm-" + Version); err != nil {
			return binaries{}, fmt.Errorf("ocmtest: %w, or %s", err, BinDirEnv)
		}
	}
	bins := binaries{
		registration: filepath.Join(dir, "registration"),
		placement:    filepath.Join(dir, "placement"),
		work:         filepath.Join(dir, "work"),
	}
	for _, bin := range []string{bins.registration, bins.placement, bins.work} {
		info, err := os.Stat(bin)
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return binaries{}, fmt.Errorf("ocmtest: no executable %s: run make test/binaries (scripts/ocm/build-ocm.sh builds open-cluster-management %s into %s; %s chooses the folder)",
				bin, Version, dir, BinDirEnv)
		}
	}
	return bins, nil
}
