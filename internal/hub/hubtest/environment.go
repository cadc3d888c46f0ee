package hubtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// startEnvironment starts etcd and kube-apiserver through envtest, with the
// binaries given explicitly so that envtest never downloads any, and the
// control plane's files and logs in dir. Callers authenticate with the
// returned static admin token in system:masters, as RBAC authorises.
func startEnvironment(bins binaries, dir string) (*envtest.Environment, string, error) {
	// envtest logs through controller-runtime's global logger, which
	// otherwise prints a stack trace when first used late in a test binary.
	ctrllog.SetLogger(logr.Discard())
	token, err := writeTokenFile(filepath.Join(dir, "tokens.csv"))
	if err != nil {
		return nil, "", err
	}
	etcdLog, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, "", fmt.Errorf("startEnvironment: %w", err)
	}
	defer etcdLog.Close() // the children write to their own copies
	apiLog, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, "", fmt.Errorf("startEnvironment: %w", err)
	}
	defer apiLog.Close()
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bins.dir,
		UseExistingCluster:       new(false),
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  10 * time.Second,
	}
	// The apiserver's certificates live in dir: envtest forgets the folder it
	// makes for them when it retries a failed start.
	certDir := filepath.Join(dir, "apiserver")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("startEnvironment: %w", err)
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: withParent(dir, bins.etcd), Out: etcdLog, Err: etcdLog}
	api := env.ControlPlane.GetAPIServer()
	api.Path, api.CertDir = withParent(dir, bins.apiserver), certDir
	api.Out, api.Err = apiLog, apiLog
	api.Configure().
		Set("token-auth-file", filepath.Join(dir, "tokens.csv")).
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		return nil, "", fmt.Errorf("startEnvironment: %w; end of %s:\n%s\nend of %s:\n%s", err,
			etcdLog.Name(), logTail(etcdLog.Name()), apiLog.Name(), logTail(apiLog.Name()))
	}
	return env, token, nil
}

// writeTokenFile writes kube-apiserver's static token file with one admin in
// system:masters and returns the admin's token.
func writeTokenFile(path string) (string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("writeTokenFile: %w", err)
	}
	token := hex.EncodeToString(secret)
	line := token + `,hubtest-admin,hubtest-admin,"system:masters"` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return "", fmt.Errorf("writeTokenFile: %w", err)
	}
	return token, nil
}

// withParent returns a script in dir, named as bin, that runs bin with the
// kernel told to kill it when the test binary dies. envtest starts its
// children in a process group of their own, so a test binary killed by its
// timeout or by Ctrl-C would otherwise leave them running. Without setpriv
// (util-linux) it returns bin itself.
func withParent(dir, bin string) string {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return bin
	}
	script := filepath.Join(dir, filepath.Base(bin))
	body := "#!/bin/sh\nexec " + shellQuote(setpriv) + " --pdeathsig KILL -- " + shellQuote(bin) + ` "$@"` + "\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		return bin
	}
	return script
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// logTail returns the last lines of a control-plane log.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-20):], []byte("\n")))
}

// installCRDs creates the CRDs, waits until the apiserver serves each and
// then lets the apiserver's "just created" window pass: for two seconds after
// a CRD is Established, every create of its objects sleeps two seconds (see
// the "create" case in apiextensions-apiserver's customresource_handler.go),
// which each test's first create would otherwise pay. It returns the CRDs'
// names, sorted.
func installCRDs(ctx context.Context, config *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) ([]string, error) {
	if _, err := envtest.InstallCRDs(config, envtest.CRDInstallOptions{CRDs: crds, MaxTime: time.Minute, PollInterval: 50 * time.Millisecond}); err != nil {
		return nil, fmt.Errorf("installCRDs: %w", err)
	}
	client, err := apiextensions.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("installCRDs: %w", err)
	}
	// The apiserver serves a CRD's resources once it is Established: one
	// list finds every condition set.
	list, err := client.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("installCRDs: %w", err)
	}
	established := map[string]time.Time{}
	for _, crd := range list.Items {
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established[crd.Name] = cond.LastTransitionTime.Time
			}
		}
	}
	names := make([]string, 0, len(crds))
	var latest time.Time
	for _, crd := range crds {
		since, ok := established[crd.Name]
		if !ok {
			return nil, fmt.Errorf("installCRDs: %s served but not Established", crd.Name)
		}
		if since.After(latest) {
			latest = since
		}
		names = append(names, crd.Name)
	}
	slices.Sort(names)
	// The condition time has whole seconds, as the apiserver compares it. The
	// window is a fixed time on the server's side: no condition to poll for.
	window := time.NewTimer(time.Until(latest.Add(2*time.Second + 50*time.Millisecond)))
	defer window.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-window.C:
	}
	return names, nil
}
