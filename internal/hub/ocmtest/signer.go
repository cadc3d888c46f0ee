package ocmtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// clusterNameLabel is the label the registration agent puts on its CSRs
// (clusterv1.ClusterNameLabelKey in open-cluster-management.io/api).
const clusterNameLabel = "open-cluster-management.io/cluster-name"

// The kube-controller-manager signer's rules for kubernetes.io/kube-apiserver-client
// (pkg/controller/certificates/signer in k8s.io/kubernetes): client auth is
// required, digital signature and key encipherment are allowed, nothing else.
var allowedClientUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment,
}

const (
	// maxCertDuration is kube-controller-manager's --cluster-signing-duration default.
	maxCertDuration = 365 * 24 * time.Hour
	// backdate is how far before now the signer starts a certificate's
	// validity, for clocks a little behind, as kube-controller-manager does.
	backdate = 5 * time.Minute
)

// clientCA is the certificate authority of the stand-in signer; the hub's
// kube-apiserver trusts it for client certificates.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newClientCA() (*clientCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ocmtest: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ocmtest kube-apiserver-client signer"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(10 * maxCertDuration),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ocmtest: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ocmtest: CA certificate: %w", err)
	}
	return &clientCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a client certificate for pub with subject, valid for ttl.
func (ca *clientCA) issue(pub crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage, ttl time.Duration) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("ocmtest: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(ttl),
	}
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageClientAuth:
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		case certificatesv1.UsageDigitalSignature:
			tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("ocmtest: sign: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// issueKey makes a key and a client certificate for user in groups, for
// the harness's own check that the hub trusts the CA.
func (ca *clientCA) issueKey(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("ocmtest: client key: %w", err)
	}
	certPEM, err = ca.issue(&key.PublicKey, pkix.Name{CommonName: user, Organization: groups},
		[]certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature}, time.Hour)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("ocmtest: client key: %w", err)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// csrStandIn does on the hub what two parties outside open-cluster-management's
// hub controllers do for a cluster's first certificate:
//
//   - it approves a registration agent's CSR made with the bootstrap identity
//     once the cluster's ManagedCluster has hubAcceptsClient true, as
//     `clusteradm accept` does (open-cluster-management-io/clusteradm,
//     pkg/cmd/accept) and RHACM's import controller does for the clusters it
//     imports. The registration controller approves only renewals (a CSR
//     whose requester is the certificate's own subject) and, with its
//     ManagedClusterAutoApproval feature gate, CSRs of listed users; the
//     gate also accepts every new cluster, which would hide what Fleet
//     Manager's hubAcceptsClient says, so it stays off.
//   - it signs approved CSRs for the kubernetes.io/kube-apiserver-client
//     signer, as kube-controller-manager's csrsigning controller does
//     (https://kubernetes.io/docs/reference/access-authn-authz/certificate-signing-requests/#kubernetes-signers):
//     kube-apiserver has no signer of its own and the test hub runs no
//     kube-controller-manager. A CSR asking for other usages fails, as there.
type csrStandIn struct {
	kube          kubernetes.Interface
	dyn           dynamic.Interface
	bootstrapUser string
	ca            *clientCA
}

// run passes over the hub's CSRs every interval until ctx ends; a pass that
// fails (the hub busy) is retried on the next.
func (s *csrStandIn) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		_ = s.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *csrStandIn) pass(ctx context.Context) error {
	list, err := s.kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{LabelSelector: clusterNameLabel})
	if err != nil {
		return err
	}
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
			continue
		}
		switch {
		case hasCondition(csr, certificatesv1.CertificateDenied), hasCondition(csr, certificatesv1.CertificateFailed):
		case !hasCondition(csr, certificatesv1.CertificateApproved):
			if err := s.approve(ctx, csr); err != nil {
				return err
			}
		case len(csr.Status.Certificate) == 0:
			if err := s.sign(ctx, csr); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}

// approve approves a bootstrap CSR of an accepted cluster and leaves every
// other one alone (renewals are the registration controller's).
func (s *csrStandIn) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if csr.Spec.Username != s.bootstrapUser {
		return nil
	}
	mc, err := s.dyn.Resource(hubkind.ManagedCluster.GVR()).Get(ctx, csr.Labels[clusterNameLabel], metav1.GetOptions{})
	if err != nil {
		return nil // not created yet, or the hub busy: the next pass sees
	}
	if accepted, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); !accepted {
		return nil
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:    certificatesv1.CertificateApproved,
		Status:  corev1.ConditionTrue,
		Reason:  "ApprovedByOCMTest",
		Message: "the cluster's ManagedCluster has hubAcceptsClient true (ocmtest plays clusteradm accept)",
	})
	_, err = s.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	return err
}

// sign issues the certificate an approved CSR asks for, or fails a CSR the
// kube-apiserver-client signer would refuse.
func (s *csrStandIn) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	block, _ := pem.Decode(csr.Spec.Request)
	var req *x509.CertificateRequest
	var err error
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		err = fmt.Errorf("the request is not a PEM CERTIFICATE REQUEST")
	} else if req, err = x509.ParseCertificateRequest(block.Bytes); err == nil {
		err = req.CheckSignature()
	}
	if err == nil {
		err = validClientUsages(csr.Spec.Usages)
	}
	if err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:    certificatesv1.CertificateFailed,
			Status:  corev1.ConditionTrue,
			Reason:  "SignerValidationFailure",
			Message: err.Error(),
		})
		_, err = s.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		return err
	}
	ttl := maxCertDuration
	if csr.Spec.ExpirationSeconds != nil {
		ttl = min(ttl, max(10*time.Minute, time.Duration(*csr.Spec.ExpirationSeconds)*time.Second))
	}
	cert, err := s.ca.issue(req.PublicKey, req.Subject, csr.Spec.Usages, ttl)
	if err != nil {
		return err
	}
	csr.Status.Certificate = cert
	_, err = s.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	return err
}

func validClientUsages(usages []certificatesv1.KeyUsage) error {
	if !slices.Contains(usages, certificatesv1.UsageClientAuth) {
		return fmt.Errorf("usages do not include %q", certificatesv1.UsageClientAuth)
	}
	for _, u := range usages {
		if !slices.Contains(allowedClientUsages, u) {
			return fmt.Errorf("usage %q is not allowed for %s", u, certificatesv1.KubeAPIServerClientSignerName)
		}
	}
	return nil
}
