package installertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hub/installertest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// poolCase is one pool cluster as a deployment renders it for Hive.
type poolCase struct {
	name     string
	reg      fleet.Registration
	delivery fleet.PoolClusterDelivery
}

// pullSecret is a pull secret of the form the installer accepts; the pool's
// credentials carry the real one.
const pullSecret = `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`

// deploymentConfig is a deployment's pool settings, with what a fork must
// set for each cloud set.
func deploymentConfig() fleet.PoolConfig {
	cfg := fleet.DefaultPoolConfig()
	cfg.AzureBaseDomainResourceGroup = "dns-rg"
	cfg.GCPProjectID = "fleet-pools-1"
	return cfg
}

// poolCases renders a pool cluster for every cloud and architecture the
// blueprints support, with the shortest and the longest pool names
// fleet.PoolCreate accepts and one that starts with a digit (pool clusters
// are named <pool>-<6 hex>); prefix (four hex digits) goes in their ids.
func poolCases(prefix string) []poolCase {
	names := map[string]string{
		"short":   "a-1f2e3d",
		"longest": "p" + strings.Repeat("o", 38) + "l-1f2e3d",
		"digit":   "1pool-1f2e3d",
	}
	var out []poolCase
	n := 0
	for _, cloud := range fleet.Clouds() {
		for _, arch := range fleet.Architectures() {
			for _, label := range []string{"short", "longest", "digit"} {
				n++
				spec := fleet.BlueprintSpec{Release: "4.16.3", Architecture: arch, ControlPlane: fleet.SizeMedium, MachinePools: []fleet.MachinePoolSpec{
					{Name: "infra", Size: fleet.SizeSmall, Replicas: ptr(2), Labels: map[string]string{"node-role.kubernetes.io/infra": ""},
						Taints: []fleet.Taint{{Key: "node-role.kubernetes.io/infra", Effect: "NoSchedule"}}},
					{Name: "workers", Size: fleet.SizeLarge, Autoscaling: &fleet.Autoscaling{Min: 2, Max: 6}},
				}, AddOns: []fleet.AddOn{{Name: "observability", Manifests: []map[string]any{
					{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}}}}}}
				out = append(out, poolCase{
					name: fmt.Sprintf("%s/%s/%s", cloud, arch, label),
					reg: fleet.Registration{ID: fmt.Sprintf("1c0a0000-0000-4000-8000-0000%s%04d", prefix, n), OrgID: "org-a", Name: names[label],
						Labels: map[string]string{fleet.LabelPoolID: "p1"}},
					delivery: fleet.PoolClusterDelivery{PoolID: "p1", Cloud: cloud, Region: region(cloud), BlueprintVersion: 1, Spec: spec,
						Replicas: map[string]int{"infra": 2, "workers": 2}, AddOns: true,
						Credentials: &fleet.PoolCredentials{Cloud: map[string]string{"credentials": "x"}, PullSecret: pullSecret}},
				})
			}
		}
	}
	return out
}

func region(c fleet.Cloud) string {
	switch c {
	case fleet.CloudGCP:
		return "us-central1"
	case fleet.CloudAzure:
		return "eastus"
	default:
		return "us-east-1"
	}
}

func ptr[T any](v T) *T { return &v }

// find returns the rendered object of kind named name.
func find(t *testing.T, objs []map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && o["metadata"].(map[string]any)["name"] == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

// releaseArchitecture maps a release image's tag suffix (the
// openshift-release-dev naming: 4.16.3-x86_64) to the installer's
// architecture name.
var releaseArchitecture = map[string]string{"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}

// TestInstallerAcceptsRenderedInstallConfigs runs the installer's own
// validation on every install-config a pool cluster is rendered with, after
// Hive pastes the ClusterDeployment's pull secret in (hive v1.1.16
// pkg/installmanager, pasteInPullSecret), and checks that the
// ClusterImageSet's release is built for the architecture the installer
// gives the machines: Hive runs the installer with
// OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE set, so the installer's own
// release-architecture check does not run.
func TestInstallerAcceptsRenderedInstallConfigs(t *testing.T) {
	t.Parallel()
	cases := poolCases("0000")
	docs := make([][]byte, len(cases))
	images := make([]string, len(cases))
	for i, c := range cases {
		objs := fleet.PoolClusterObjects(c.reg, "hub-1", c.delivery, deploymentConfig())
		name := fleet.ManagedClusterName(c.reg)
		secret := find(t, objs, "Secret", name+"-install-config")
		var ic map[string]any
		if err := json.Unmarshal([]byte(secret["stringData"].(map[string]any)["install-config.yaml"].(string)), &ic); err != nil {
			t.Fatalf("%s: install-config is not JSON: %v", c.name, err)
		}
		ic["pullSecret"] = c.delivery.Credentials.PullSecret
		docs[i], _ = json.Marshal(ic)
		images[i] = find(t, objs, "ClusterImageSet", name)["spec"].(map[string]any)["releaseImage"].(string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results, err := installertest.Validate(ctx, docs...)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		for _, e := range results[i].Errors {
			t.Errorf("%s: the installer refuses the install-config: %s", c.name, e)
		}
		_, suffix, _ := strings.Cut(images[i][strings.LastIndex(images[i], ":")+1:], "-")
		arch := results[i].Architectures
		for _, a := range append([]string{arch.ControlPlane}, arch.Compute...) {
			if releaseArchitecture[suffix] != a {
				t.Errorf("%s: release image %s is for %q, the installer makes %q machines", c.name, images[i], releaseArchitecture[suffix], a)
			}
		}
	}
}

// TestHiveObjectsApplyStrictly creates every object a pool cluster is
// rendered with on a hub holding Hive's and RHACM's CRDs, with strict field
// validation: a field the CRD does not declare, a wrong type or a missing
// required field fails, as it would on a real hub.
func TestHiveObjectsApplyStrictly(t *testing.T) {
	t.Parallel()
	dyn := hubtest.Dynamic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Fresh names each run: the hub lives as long as the test binary.
	for _, c := range poolCases(fmt.Sprintf("%04x", rand.N(1<<16))) {
		for _, o := range fleet.PoolClusterObjects(c.reg, "hub-1", c.delivery, deploymentConfig()) {
			// As the agent reads an object of its desired set.
			obj, err := hubkind.ToUnstructured(o)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			kind, ok := hubKind(obj)
			if !ok {
				t.Fatalf("%s: %s %s is of no kind hubkind knows", c.name, obj.GetAPIVersion(), obj.GetKind())
			}
			var r dynamic.ResourceInterface = dyn.Resource(kind.GVR())
			if kind.Namespaced {
				r = dyn.Resource(kind.GVR()).Namespace(obj.GetNamespace())
			}
			_, err2 := r.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if err2 != nil {
				t.Errorf("%s: %s %s: %v", c.name, obj.GetKind(), obj.GetName(), err2)
			}
		}
	}
	// The hub refuses a field Hive's CRD does not declare, as a projectID
	// on a ClusterDeployment's platform: the GCP project goes in the
	// install-config only.
	c := poolCases(fmt.Sprintf("%04x", rand.N(1<<16)))[0]
	for _, o := range fleet.PoolClusterObjects(c.reg, "hub-1", c.delivery, deploymentConfig()) {
		if o["kind"] != "ClusterDeployment" {
			continue
		}
		obj, err := hubkind.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace("default")
		_ = unstructured.SetNestedField(obj.Object, "fleet-pools-1", "spec", "platform", "aws", "projectID")
		_, err = dyn.Resource(hubkind.ClusterDeployment.GVR()).Namespace("default").Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "projectID") {
			t.Errorf("Create(ClusterDeployment with an undeclared field) error = %v, want a BadRequest naming the field", err)
		}
	}
}

// hubKind returns the hub kind of obj.
func hubKind(obj *unstructured.Unstructured) (hubkind.Kind, bool) {
	for _, k := range hubkind.All() {
		if k.Is(obj) {
			return k, true
		}
	}
	return hubkind.Kind{}, false
}
