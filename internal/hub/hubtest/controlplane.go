package hubtest

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is an etcd and a kube-apiserver started as the hub's are, with
// the same binaries, but with no CRD installed and not shared: a second
// cluster beside the hub, such as the managed cluster of
// internal/hub/ocmtest. Its caller stops it.
type ControlPlane struct {
	env    *envtest.Environment
	dir    string
	config *rest.Config
}

// StartControlPlane starts a control plane of its own. It fails when the
// binaries are missing, naming the make target that provides them.
func StartControlPlane() (_ *ControlPlane, err error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{}
	if cp.dir, err = os.MkdirTemp("", "hubtest-cp-"); err != nil {
		return nil, fmt.Errorf("hubtest.StartControlPlane: %w", err)
	}
	var token string
	if cp.env, token, err = startEnvironment(bins, cp.dir); err != nil {
		cp.Stop()
		return nil, fmt.Errorf("hubtest.StartControlPlane: %w", err)
	}
	cp.config = &rest.Config{
		Host:            cp.env.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.env.Config.CAData},
		QPS:             100,
		Burst:           200,
		UserAgent:       "hubtest",
	}
	return cp, nil
}

// RESTConfig returns a copy of the admin configuration: a system:masters
// token and the CA of the apiserver's serving certificate.
func (c *ControlPlane) RESTConfig() *rest.Config {
	return rest.CopyConfig(c.config)
}

// Dir returns the folder of the control plane's files and logs, which Stop
// removes.
func (c *ControlPlane) Dir() string {
	return c.dir
}

// Stop ends the control plane and removes its files.
func (c *ControlPlane) Stop() {
	if c.env != nil {
		_ = c.env.Stop()
	}
	os.RemoveAll(c.dir)
}

// TrustClientCA adds a CA to those whose client certificates the hub's
// kube-apiserver accepts, for a test that signs certificate signing requests
// itself: the hub has no kube-controller-manager, whose signer would. The
// apiserver reloads its client CA file when it changes (the
// DynamicFileCAContent of k8s.io/apiserver), so the CA takes effect soon
// after, not at once: the caller waits for it. The CAs trusted before stay
// trusted.
func (h *Hub) TrustClientCA(caPEM []byte) error {
	return appendClientCA(h.env, caPEM)
}

// TrustClientCA is Hub.TrustClientCA for a control plane of its own.
func (c *ControlPlane) TrustClientCA(caPEM []byte) error {
	return appendClientCA(c.env, caPEM)
}

// appendClientCA appends to the file that envtest gave kube-apiserver as its
// --client-ca-file.
func appendClientCA(env *envtest.Environment, caPEM []byte) error {
	files := env.ControlPlane.GetAPIServer().Configure().Get("client-ca-file").Get(nil)
	if len(files) != 1 {
		return fmt.Errorf("hubtest.TrustClientCA: the apiserver has %d client CA files, not one", len(files))
	}
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("hubtest.TrustClientCA: %w", err)
	}
	// One write: the apiserver never reads half a certificate.
	if _, err := f.Write(append([]byte("\n"), caPEM...)); err != nil {
		f.Close()
		return fmt.Errorf("hubtest.TrustClientCA: %w", err)
	}
	return f.Close()
}
