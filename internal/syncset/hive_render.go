package syncset

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// hiveSet is a registration's SyncSet and the source Secrets it maps.
type hiveSet struct {
	syncSet   *unstructured.Unstructured
	secrets   []*unstructured.Unstructured
	resources int
}

// hiveRender puts a registration's objects in its SyncSet; each Secret goes
// into a source Secret next to the SyncSet, mapped to its place on the hub.
func hiveRender(target fleet.HiveTarget, hubID string, reg fleet.Registration, objects []map[string]any) (hiveSet, error) {
	name := fleet.SyncSetName(reg)
	own := map[string]string{fleet.LabelRegistrationID: reg.ID, fleet.LabelOrgID: reg.OrgID, fleet.LabelHubID: hubID, fleet.LabelManagedBy: hiveManagedBy}
	var set hiveSet
	resources, mappings := []any{}, []any{}
	for i, o := range objects {
		obj, err := hubkind.ToUnstructured(o)
		if err != nil {
			return hiveSet{}, hiveInvalidf("registration %s: objects[%d]: %v", reg.ID, i, err)
		}
		if !hubkind.Secret.Is(obj) {
			resources = append(resources, obj.Object)
			continue
		}
		source, err := hiveSourceSecret(target.Namespace, name, own, obj)
		if err != nil {
			return hiveSet{}, hiveInvalidf("registration %s: objects[%d]: %v", reg.ID, i, err)
		}
		for _, s := range set.secrets {
			if s.GetName() == source.GetName() {
				return hiveSet{}, hiveInvalidf("registration %s: two Secrets map to source Secret %s", reg.ID, s.GetName())
			}
		}
		set.secrets = append(set.secrets, source)
		mappings = append(mappings, map[string]any{
			"sourceRef": map[string]any{"name": source.GetName(), "namespace": target.Namespace},
			"targetRef": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
		})
	}
	spec := map[string]any{
		"clusterDeploymentRefs": []any{map[string]any{"name": target.ClusterDeployment}},
		"resourceApplyMode":     hiveModeSync,
		"resources":             resources,
	}
	if len(mappings) > 0 {
		spec["secretMappings"] = mappings
	}
	set.syncSet = hubkind.SyncSet.New(target.Namespace, name)
	set.syncSet.Object["spec"] = spec
	set.syncSet.SetLabels(own)
	set.resources = len(resources)
	return set, nil
}

// hiveSourceSecret holds a Secret's data (stringData encoded) next to the
// SyncSet, with the SyncSet's labels over the Secret's own: Hive copies its
// type, data, labels and annotations to the hub.
func hiveSourceSecret(namespace, syncSet string, own map[string]string, secret *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if secret.GetNamespace() == "" {
		//lint:ignore ST1005 the error names the Kubernetes kind, spelt as the API spells it
		return nil, fmt.Errorf("Secret %s without a namespace", secret.GetName())
	}
	data, _, err := unstructured.NestedStringMap(secret.Object, "data")
	if err != nil {
		//lint:ignore ST1005 the error names the Kubernetes kind, spelt as the API spells it
		return nil, fmt.Errorf("Secret %s: data: %w", secret.GetName(), err)
	}
	plain, _, err := unstructured.NestedStringMap(secret.Object, "stringData")
	if err != nil {
		//lint:ignore ST1005 the error names the Kubernetes kind, spelt as the API spells it
		return nil, fmt.Errorf("Secret %s: stringData: %w", secret.GetName(), err)
	}
	encoded := map[string]any{}
	for k, v := range data {
		encoded[k] = v
	}
	for k, v := range plain {
		encoded[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	secretType, _, _ := unstructured.NestedString(secret.Object, "type")
	if secretType == "" {
		secretType = "Opaque"
	}
	source := hubkind.Secret.New(namespace, hiveSourceSecretName(syncSet, secret.GetNamespace(), secret.GetName()))
	source.Object["type"], source.Object["data"] = secretType, encoded
	lbls := secret.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	maps.Copy(lbls, own)
	source.SetLabels(lbls)
	source.SetAnnotations(secret.GetAnnotations())
	return source, nil
}

// hiveSourceSecretName is <syncset>-<secret>, shortened with a hash of the
// Secret's namespace and name past the 253 characters of a name.
func hiveSourceSecretName(syncSet, namespace, name string) string {
	full := syncSet + "-" + name
	if len(full) <= 253 {
		return full
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(full[:253-len(suffix)], "-.") + suffix
}
