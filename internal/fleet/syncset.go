package fleet

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// OCMTarget names a syncset-ocm hub in OCM: its cluster id, the clusters_mgmt
// API and, when not the deployment's default, the SSO token endpoint.
type OCMTarget struct {
	ClusterID string `json:"cluster_id"`
	APIURL    string `json:"api_url"`
	TokenURL  string `json:"token_url,omitempty"`
}

// HiveTarget names a syncset-hive hub's ClusterDeployment on the Hive cluster
// that provisioned it; the SyncSets go in its namespace.
type HiveTarget struct {
	Namespace         string `json:"cluster_deployment_namespace"`
	ClusterDeployment string `json:"cluster_deployment_name"`
}

// The keys of a hub's write-only credentials, per delivery mode: syncset-ocm
// takes an OAuth client (id and secret) or an offline token; syncset-hive a
// kubeconfig of the Hive cluster.
const (
	CredentialOCMClientID     = "client_id"
	CredentialOCMClientSecret = "client_secret"
	CredentialOCMOfflineToken = "offline_token"
	CredentialHiveKubeconfig  = "kubeconfig"
)

// Reasons of SyncSet delivery.
const (
	// ReasonSyncSetApplied: the SyncSet holds the registration's objects.
	ReasonSyncSetApplied = "SyncSetApplied"
	// ReasonSyncSetDeleted: the SyncSet is gone, and its objects with it.
	ReasonSyncSetDeleted = "SyncSetDeleted"
	// ReasonSyncSetAPIError: the SyncSet API failed (5xx, timeout, network);
	// retried with backoff.
	ReasonSyncSetAPIError = "SyncSetAPIError"
	// ReasonNoAgentOnHub: the hub runs no agent, so nothing reports whether
	// the cluster joined or is available.
	ReasonNoAgentOnHub = "NoAgentOnHub"
	// ReasonHandingOff: the hub moved to another delivery mode; the new one
	// holds the objects and the old one lets go of them.
	ReasonHandingOff = "HandingOff"
)

// Releaser is a Delivery that can let go of a registration's objects without
// removing them from the hub, so that another delivery mode, already holding
// them, takes them over (a hub moving from a SyncSet to its agent).
type Releaser interface {
	Release(ctx context.Context, hub Hub, reg Registration) (DeliveryReport, error)
}

// SyncSetName is the name of a registration's SyncSet in Hive: derived from
// its id only.
func SyncSetName(reg Registration) string {
	return "fleet-" + strings.ReplaceAll(reg.ID, "-", "")
}

// OCMSyncSetID is the id of a registration's external-configuration SyncSet
// in OCM: "ext-", the prefix every OCM client gives the SyncSets it adds,
// then the registration id's hex digits, derived from its id only (OCM
// allows 50 characters).
func OCMSyncSetID(reg Registration) string {
	return "ext-" + strings.ReplaceAll(reg.ID, "-", "")
}

// LegacyOCMSyncSetID is the id earlier releases gave a registration's OCM
// SyncSet: delivery removes it once the SyncSet under OCMSyncSetID exists,
// and withdrawal removes both.
func LegacyOCMSyncSetID(reg Registration) string { return SyncSetName(reg) }

// validate checks an OCM target; errors carry CodeValidation.
func (t OCMTarget) validate() error {
	if !ocmClusterID.MatchString(t.ClusterID) {
		return Errorf(CodeValidation, "ocm.cluster_id must be 1 to 63 letters, digits, '-' or '_'")
	}
	if err := validateServiceURL("ocm.api_url", t.APIURL, false); err != nil {
		return err
	}
	return validateServiceURL("ocm.token_url", t.TokenURL, true)
}

// validate checks a Hive target; errors carry CodeValidation.
func (t HiveTarget) validate() error {
	if !dnsLabel.MatchString(t.Namespace) {
		return Errorf(CodeValidation, "hive.cluster_deployment_namespace must be a DNS label")
	}
	if !dnsSubdomain.MatchString(t.ClusterDeployment) || len(t.ClusterDeployment) > 253 {
		return Errorf(CodeValidation, "hive.cluster_deployment_name must be a DNS subdomain")
	}
	return nil
}

// validateServiceURL accepts an https URL, or http to a loopback host (a
// local test server); optional URLs may be empty.
func validateServiceURL(field, raw string, optional bool) error {
	if raw == "" && optional {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Errorf(CodeValidation, "%s must be an absolute URL without credentials, query or fragment", field)
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme == "http" && LoopbackHost(u.Hostname()) {
		return nil
	}
	return Errorf(CodeValidation, "%s must be an https:// URL (http:// only to a loopback host)", field)
}

// LoopbackHost is true for localhost and loopback addresses: the only hosts
// a service URL may reach over plain http (a local test server).
func LoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// validateCredentialKeys checks that credentials hold what the mode needs.
func validateCredentialKeys(mode DeliveryMode, creds map[string]string) error {
	has := func(k string) bool { return creds[k] != "" }
	switch mode {
	case DeliverySyncSetOCM:
		client, offline := has(CredentialOCMClientID) || has(CredentialOCMClientSecret), has(CredentialOCMOfflineToken)
		if client == offline || client && !(has(CredentialOCMClientID) && has(CredentialOCMClientSecret)) {
			return Errorf(CodeValidation, "credentials of a syncset-ocm hub: give %s and %s, or %s",
				CredentialOCMClientID, CredentialOCMClientSecret, CredentialOCMOfflineToken)
		}
	case DeliverySyncSetHive:
		if !has(CredentialHiveKubeconfig) {
			return Errorf(CodeValidation, "credentials of a syncset-hive hub: give %s (of the Hive cluster)", CredentialHiveKubeconfig)
		}
	}
	return nil
}

// validateTargets checks that a SyncSet mode has its target and credentials.
func validateTargets(mode DeliveryMode, ocm *OCMTarget, hive *HiveTarget, creds map[string]string, hasCreds bool) error {
	if ocm != nil {
		if err := ocm.validate(); err != nil {
			return err
		}
	}
	if hive != nil {
		if err := hive.validate(); err != nil {
			return err
		}
	}
	switch {
	case mode == DeliverySyncSetOCM && ocm == nil:
		return Errorf(CodeValidation, "ocm (cluster_id, api_url) is required for delivery_mode %s", mode)
	case mode == DeliverySyncSetHive && hive == nil:
		return Errorf(CodeValidation, "hive (cluster_deployment_namespace, cluster_deployment_name) is required for delivery_mode %s", mode)
	}
	if creds != nil {
		return validateCredentialKeys(mode, creds)
	}
	if mode != DeliveryAgent && !hasCreds {
		return Errorf(CodeValidation, "credentials are required for delivery_mode %s", mode)
	}
	return nil
}

// String names a target for logs and messages.
func (t OCMTarget) String() string { return fmt.Sprintf("OCM cluster %s at %s", t.ClusterID, t.APIURL) }

// String names a target for logs and messages.
func (t HiveTarget) String() string {
	return fmt.Sprintf("ClusterDeployment %s/%s", t.Namespace, t.ClusterDeployment)
}
