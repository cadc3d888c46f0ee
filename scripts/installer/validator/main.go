// Command installer-validator checks install-config documents with the
// OpenShift installer's own code, as `openshift-install` reads them before
// it touches a cloud: a strict decode (the installer warns about unknown
// fields and goes on; here they are reported), the upconversion of
// deprecated fields, the installer's defaults, then ValidateInstallConfig.
// The cloud checks that need a cloud account (pkg/asset/installconfig/<cloud>)
// are not run.
//
//	installer-validator [FILE...]   (no FILE: standard input)
//
// A file may hold several YAML documents separated by "---". For each
// document it prints one line of JSON:
//
//	{"document":"FILE#INDEX","architectures":{"controlPlane":"amd64","compute":["amd64"]},
//	 "errors":[{"type":"FieldValueRequired","field":"platform.azure.baseDomainResourceGroupName","detail":"..."}]}
//
// architectures are the machine pools' architectures after the installer's
// defaults, which the release image must match. It exits 1 when any
// document has an error, 2 when an input cannot be read.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sirupsen/logrus"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/openshift/installer/pkg/types"
	"github.com/openshift/installer/pkg/types/conversion"
	"github.com/openshift/installer/pkg/types/defaults"
	"github.com/openshift/installer/pkg/types/validation"
)

// installerVersion and source are set by build-validator.sh: the module
// version built against and the hash of this file, which the script compares
// to decide whether the cached binary is current.
var (
	installerVersion = "unknown"
	source           = "unknown"
)

type fieldError struct {
	Type   string `json:"type"`
	Field  string `json:"field"`
	Detail string `json:"detail,omitempty"`
}

type architectures struct {
	ControlPlane string   `json:"controlPlane"`
	Compute      []string `json:"compute"`
}

type result struct {
	Document      string         `json:"document"`
	Architectures *architectures `json:"architectures,omitempty"`
	Errors        []fieldError   `json:"errors"`
}

func main() {
	version := flag.Bool("version", false, "print the installer version and source hash, then exit")
	flag.Parse()
	if *version {
		fmt.Printf("installer-validator github.com/openshift/installer@%s source %s\n", installerVersion, source)
		return
	}
	// The installer logs warnings (deprecated fields, an unknown release
	// architecture); keep them off the JSON on standard output.
	logrus.SetOutput(os.Stderr)
	out := json.NewEncoder(os.Stdout)
	failed := false
	inputs := flag.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	for _, name := range inputs {
		var r io.Reader = os.Stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			defer f.Close()
			r = f
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
		for i := 0; ; i++ {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
				os.Exit(2)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			res := check(doc)
			res.Document = fmt.Sprintf("%s#%d", name, i)
			if len(res.Errors) > 0 {
				failed = true
			}
			if err := out.Encode(res); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

// check runs what pkg/asset/installconfig's AssetBase.LoadFromFile and
// InstallConfig.finish run on an install-config file.
func check(doc []byte) result {
	res := result{Errors: []fieldError{}}
	ic := &types.InstallConfig{}
	if err := yaml.UnmarshalStrict(doc, ic, yaml.DisallowUnknownFields); err != nil {
		typ := "Decode"
		if strings.Contains(err.Error(), "unknown field") {
			typ = "FieldValueUnknown"
		}
		res.Errors = append(res.Errors, fieldError{Type: typ, Detail: err.Error()})
		if typ == "Decode" {
			return res
		}
		ic = &types.InstallConfig{}
		if err := yaml.Unmarshal(doc, ic); err != nil {
			res.Errors = append(res.Errors, fieldError{Type: "Decode", Detail: err.Error()})
			return res
		}
	}
	if err := conversion.ConvertInstallConfig(ic); err != nil {
		res.Errors = append(res.Errors, fieldError{Type: "Conversion", Detail: err.Error()})
		return res
	}
	defaults.SetInstallConfigDefaults(ic)
	arch := &architectures{Compute: []string{}}
	if ic.ControlPlane != nil {
		arch.ControlPlane = string(ic.ControlPlane.Architecture)
	}
	for _, p := range ic.Compute {
		arch.Compute = append(arch.Compute, string(p.Architecture))
	}
	res.Architectures = arch
	for _, e := range validation.ValidateInstallConfig(ic, false) {
		// Detail, never BadValue: a value may be a pull secret.
		res.Errors = append(res.Errors, fieldError{Type: string(e.Type), Field: e.Field, Detail: e.Detail})
	}
	return res
}
