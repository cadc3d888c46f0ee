package hubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// startAttempts bounds the retries when another process takes a port between
// freePorts and the bind.
const startAttempts = 3

// controlPlane is an etcd and a kube-apiserver in one temporary folder.
type controlPlane struct {
	dir       string
	etcd      *childproc.Process
	apiserver *childproc.Process
	host      string // https://127.0.0.1:<port>
	token     string // static admin token, group system:masters
	caData    []byte // the serving certificate the apiserver made for itself
}

// startControlPlane starts etcd and kube-apiserver from binDir and waits
// until /readyz answers. On error nothing is left running.
func startControlPlane(bins binaries, timings *Timings) (_ *controlPlane, err error) {
	dir, err := os.MkdirTemp("", "hubtest-")
	if err != nil {
		return nil, fmt.Errorf("startControlPlane: %w", err)
	}
	cp := &controlPlane{dir: dir}
	defer func() {
		if err != nil {
			cp.stop()
		}
	}()
	began := time.Now()
	etcdURL, err := cp.startEtcd(bins.etcd)
	if err != nil {
		return nil, err
	}
	timings.Etcd = time.Since(began)
	if err := cp.writeAuthFiles(); err != nil {
		return nil, err
	}
	began = time.Now()
	if err := cp.startAPIServer(bins.apiserver, etcdURL); err != nil {
		return nil, err
	}
	timings.APIServer = time.Since(began)
	return cp, nil
}

// stop ends the apiserver before its etcd and removes the folder.
func (cp *controlPlane) stop() {
	cp.apiserver.Stop(10 * time.Second)
	cp.etcd.Stop(10 * time.Second)
	os.RemoveAll(cp.dir)
}

// startEtcd starts a single-member etcd on loopback and returns its client URL.
func (cp *controlPlane) startEtcd(bin string) (string, error) {
	for attempt := 1; ; attempt++ {
		ports, err := childproc.FreePorts(2)
		if err != nil {
			return "", err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(cp.dir, "etcd-"+strconv.Itoa(attempt))
		cp.etcd, err = childproc.Start(childproc.Options{Name: "etcd", LogPath: filepath.Join(cp.dir, "etcd.log")}, bin,
			"--name=hubtest",
			"--data-dir="+dataDir,
			"--listen-client-urls="+client,
			"--advertise-client-urls="+client,
			"--listen-peer-urls="+peer,
			"--initial-advertise-peer-urls="+peer,
			"--initial-cluster=hubtest="+peer,
			"--log-level=warn",
		)
		if err != nil {
			return "", err
		}
		plain := &http.Client{Timeout: 5 * time.Second}
		err = cp.etcd.WaitReady(30*time.Second, func() error { return probe(plain, client+"/health", "") })
		if err == nil {
			return client, nil
		}
		cp.etcd.Stop(5 * time.Second)
		if !childproc.PortTaken(err) || attempt == startAttempts {
			return "", fmt.Errorf("startEtcd: %w", err)
		}
	}
}

// writeAuthFiles writes the static token file with one system:masters admin
// and the service-account signing key.
func (cp *controlPlane) writeAuthFiles() error {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("writeAuthFiles: %w", err)
	}
	cp.token = hex.EncodeToString(secret)
	tokens := cp.token + `,hubtest-admin,hubtest-admin,"system:masters"` + "\n"
	if err := os.WriteFile(filepath.Join(cp.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("writeAuthFiles: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("writeAuthFiles: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(cp.dir, "sa.key"), keyPEM, 0o600); err != nil {
		return fmt.Errorf("writeAuthFiles: %w", err)
	}
	return nil
}

// startAPIServer starts kube-apiserver on a free loopback port, waits for
// /readyz and reads the serving certificate it generated.
func (cp *controlPlane) startAPIServer(bin, etcdURL string) error {
	certDir := filepath.Join(cp.dir, "cert")
	saKey := filepath.Join(cp.dir, "sa.key")
	// The certificate is self-signed and not known yet: the readiness probe
	// alone skips verification; the clients verify against caData.
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probe only, see above
	}}
	for attempt := 1; ; attempt++ {
		ports, err := childproc.FreePorts(1)
		if err != nil {
			return err
		}
		cp.host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		cp.apiserver, err = childproc.Start(childproc.Options{Name: "kube-apiserver", LogPath: filepath.Join(cp.dir, "kube-apiserver.log")}, bin,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(ports[0]),
			"--cert-dir="+certDir,
			"--etcd-servers="+etcdURL,
			"--authorization-mode=RBAC",
			"--token-auth-file="+filepath.Join(cp.dir, "tokens.csv"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file="+saKey,
			"--service-account-signing-key-file="+saKey,
			"--service-cluster-ip-range=10.96.0.0/24",
			"--endpoint-reconciler-type=none",
			"--disable-admission-plugins=ServiceAccount",
		)
		if err != nil {
			return err
		}
		err = cp.apiserver.WaitReady(90*time.Second, func() error { return probe(insecure, cp.host+"/readyz", cp.token) })
		if err == nil {
			break
		}
		cp.apiserver.Stop(5 * time.Second)
		if !childproc.PortTaken(err) || attempt == startAttempts {
			return fmt.Errorf("startAPIServer: %w", err)
		}
	}
	var err error
	cp.caData, err = os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("startAPIServer: serving certificate: %w", err)
	}
	return nil
}

// probe returns nil when GET url answers 200.
func probe(client *http.Client, url, token string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
