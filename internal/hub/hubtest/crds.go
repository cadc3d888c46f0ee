package hubtest

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetmanager/fleet-manager/internal/policyschema"
)

// crdFiles are the hub CRDs of crds/, unmodified upstream files: its
// README names each one's source and version.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns the CustomResourceDefinitions the test hub installs: every
// file of crds/ and the Policy CRD that policyschema validates against, so
// that the hub and the validator serve one schema. They are embedded, so a
// test finds them wherever it runs.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("hubtest.CRDs: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := crdFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("hubtest.CRDs: %w", err)
		}
		found, err := decodeCRDs(path.Base(name), data)
		if err != nil {
			return nil, err
		}
		crds = append(crds, found...)
	}
	policy, err := decodeCRDs("the Policy CRD of policyschema", policyschema.CRD())
	if err != nil {
		return nil, err
	}
	return append(crds, policy...), nil
}

// InstallCRDFiles installs the CRDs of the files of fsys that pattern
// matches into the API server of config and waits until each is served:
// for the harnesses that add an engine's own CRDs to a hub or a managed
// cluster. The upstream CRDs' schema warnings are not shown.
func InstallCRDFiles(config *rest.Config, fsys fs.FS, pattern string) error {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return fmt.Errorf("hubtest.InstallCRDFiles: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return fmt.Errorf("hubtest.InstallCRDFiles: %w", err)
		}
		found, err := decodeCRDs(path.Base(name), data)
		if err != nil {
			return err
		}
		crds = append(crds, found...)
	}
	if len(crds) == 0 {
		return fmt.Errorf("hubtest.InstallCRDFiles: no file matches %s", pattern)
	}
	quiet := rest.CopyConfig(config)
	quiet.WarningHandler = rest.NoWarnings{}
	if _, err := envtest.InstallCRDs(quiet, envtest.CRDInstallOptions{CRDs: crds, MaxTime: time.Minute, PollInterval: 50 * time.Millisecond}); err != nil {
		return fmt.Errorf("hubtest.InstallCRDFiles: %w", err)
	}
	return nil
}

// decodeCRDs decodes the CRDs of one YAML stream; empty documents are
// skipped, and a stream without a CRD is an error.
func decodeCRDs(name string, data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := dec.Decode(crd)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("hubtest.CRDs: %s: %w", name, err)
		}
		if crd.Kind == "" {
			continue
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Spec.Names.Kind == "" {
			return nil, fmt.Errorf("hubtest.CRDs: %s holds a %q, not a CustomResourceDefinition", name, crd.Kind)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("hubtest.CRDs: no CustomResourceDefinition in %s", name)
	}
	return crds, nil
}
