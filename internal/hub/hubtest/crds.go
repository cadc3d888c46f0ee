package hubtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// CRDDirEnv names the environment variable that overrides the folder of hub
// CRDs, by default ../shared/hub-crds next to the module root.
const CRDDirEnv = "FLEET_MANAGER_HUB_CRDS"

// crdResource is where CustomResourceDefinitions live; going through the
// dynamic client spares a dependency on k8s.io/apiextensions-apiserver.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// findCRDDir returns $FLEET_MANAGER_HUB_CRDS, or ../shared/hub-crds from the
// folder of the go.mod that holds the working directory.
func findCRDDir() (string, error) {
	if dir := os.Getenv(CRDDirEnv); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("findCRDDir: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "hub-crds"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("findCRDDir: no go.mod above %s; set %s", wd, CRDDirEnv)
		}
		dir = parent
	}
}

// readCRDs decodes every CustomResourceDefinition of the YAML files in dir,
// in file name order; a file may hold several documents.
func readCRDs(dir string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		matches, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, fmt.Errorf("readCRDs(%s): %w", dir, err)
		}
		files = append(files, matches...)
	}
	slices.Sort(files)
	var crds []*unstructured.Unstructured
	for _, file := range files {
		docs, err := readDocuments(file)
		if err != nil {
			return nil, err
		}
		crds = append(crds, docs...)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("readCRDs(%s): no CRD found; set %s to the folder of hub CRDs", dir, CRDDirEnv)
	}
	return crds, nil
}

// readDocuments decodes the CRDs of one multi-document YAML file.
func readDocuments(file string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("readCRDs: %w", err)
	}
	defer f.Close()
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var crds []*unstructured.Unstructured
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); errors.Is(err, io.EOF) {
			return crds, nil
		} else if err != nil {
			return nil, fmt.Errorf("readCRDs(%s): %w", file, err)
		}
		if len(doc) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: doc}
		if obj.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("readCRDs(%s): kind %q, want CustomResourceDefinition", file, obj.GetKind())
		}
		crds = append(crds, obj)
	}
}

// installCRDs creates the CRDs, waits until the apiserver serves each and
// then lets the apiserver's "just created" window pass: for two seconds after
// a CRD is Established, every create of its objects sleeps two seconds (see
// the "create" case in apiextensions-apiserver's customresource_handler.go),
// which each test's first create would otherwise pay.
func installCRDs(ctx context.Context, client dynamic.Interface, crds []*unstructured.Unstructured) ([]string, error) {
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		// The upstream files carry a status block; the apiserver ignores it.
		_, err := client.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{FieldManager: "hubtest"})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("installCRDs(%s): %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	var latest time.Time
	for _, name := range names {
		established, err := waitEstablished(ctx, client, name)
		if err != nil {
			return nil, err
		}
		if established.After(latest) {
			latest = established
		}
	}
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

// waitEstablished polls the CRD until its Established condition is True and
// returns the condition's last transition time.
func waitEstablished(ctx context.Context, client dynamic.Interface, name string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		crd, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if cond := findCondition(crd, "Established"); cond["status"] == "True" {
				since, err := time.Parse(time.RFC3339, fmt.Sprint(cond["lastTransitionTime"]))
				if err != nil {
					return time.Time{}, fmt.Errorf("waitEstablished(%s): lastTransitionTime: %w", name, err)
				}
				return since, nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waitEstablished(%s): %w (last error: %v)", name, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// findCondition returns status.conditions[type=condType] of obj, or nil.
func findCondition(obj *unstructured.Unstructured, condType string) map[string]any {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if cond, ok := c.(map[string]any); ok && cond["type"] == condType {
			return cond
		}
	}
	return nil
}
