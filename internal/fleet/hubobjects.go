package fleet

import (
	"maps"
	"strings"
)

// Labels the fleet manager puts on the hub objects it owns.
const (
	LabelRegistrationID = "fleet-manager.io/registration-id"
	LabelOrgID          = "fleet-manager.io/org-id"
	// LabelHubID scopes what an agent owns to its hub, so an agent never
	// touches objects another hub's agent applied (as on a shared test hub).
	LabelHubID     = "fleet-manager.io/hub-id"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByAgent marks what fleetshard-sync applied, so it can find and
	// remove what left the desired set.
	ManagedByAgent = "fleetshard-sync"
	// AutoImportSecretName is the Secret RHACM reads to import a cluster.
	AutoImportSecretName = "auto-import-secret"
)

// ManagedClusterName is the hub-side name of a registration: its name plus a
// short suffix of its id, so two organisations' clusters of one name do not
// collide on a shared hub. At most 63 characters.
func ManagedClusterName(reg Registration) string {
	id := strings.ReplaceAll(reg.ID, "-", "")
	suffix := id[max(0, len(id)-8):]
	name := reg.Name
	if len(name) > 63-len(suffix)-1 {
		name = strings.TrimRight(name[:63-len(suffix)-1], "-")
	}
	return name + "-" + suffix
}

// DesiredObjects renders the hub-side objects of a registration, in apply
// order: its namespace, the ManagedCluster, the KlusterletAddonConfig and,
// with credentials, the auto-import secret.
func DesiredObjects(reg Registration, hubID string, creds *ImportCredentials) []map[string]any {
	name := ManagedClusterName(reg)
	own := map[string]any{LabelRegistrationID: reg.ID, LabelOrgID: reg.OrgID, LabelManagedBy: ManagedByAgent, LabelHubID: hubID}
	clusterLabels := map[string]any{}
	for k, v := range reg.Labels {
		clusterLabels[k] = v
	}
	maps.Copy(clusterLabels, own)
	objects := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "labels": maps.Clone(own)}},
		{
			"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
			"metadata": map[string]any{"name": name, "labels": clusterLabels},
			"spec":     map[string]any{"hubAcceptsClient": true, "leaseDurationSeconds": int64(60)},
		},
		{
			"apiVersion": "agent.open-cluster-management.io/v1", "kind": "KlusterletAddonConfig",
			"metadata": map[string]any{"name": name, "namespace": name, "labels": maps.Clone(own)},
			"spec": map[string]any{
				"applicationManager": map[string]any{"enabled": true}, "certPolicyController": map[string]any{"enabled": true},
				"policyController": map[string]any{"enabled": true}, "searchCollector": map[string]any{"enabled": true},
			},
		},
	}
	if creds != nil {
		objects = append(objects, autoImportSecret(name, own, *creds))
	}
	return objects
}

func autoImportSecret(namespace string, labels map[string]any, creds ImportCredentials) map[string]any {
	data := map[string]any{"autoImportRetry": "5"}
	if creds.Kubeconfig != "" {
		data["kubeconfig"] = creds.Kubeconfig
	} else {
		data["server"], data["token"] = creds.APIURL, creds.Token
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata":   map[string]any{"name": AutoImportSecretName, "namespace": namespace, "labels": maps.Clone(labels)},
		"stringData": data,
	}
}
