package templates_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/templates"
)

const (
	serviceFile = "service-template.yml"
	dbFile      = "db-template.yml"
	envPrefix   = "FLEET_MANAGER_"
)

// The types below hold the parts of the templates the tests read. Every field
// has its exact API name as a json tag and omitempty: spelledAsTagged compares
// them with the YAML, because encoding/json matches keys case-insensitively
// while the API server does not (a "readinessprobe" would be dropped there).

type template struct {
	APIVersion string            `json:"apiVersion,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Parameters []parameter       `json:"parameters,omitempty"`
	Objects    []json.RawMessage `json:"objects,omitempty"`
}

type parameter struct {
	Name     string `json:"name,omitempty"`
	Value    string `json:"value,omitempty"`
	Generate string `json:"generate,omitempty"`
	Required bool   `json:"required,omitempty"`
}

type metadata struct {
	Name string `json:"name,omitempty"`
}

type object struct {
	Kind string `json:"kind,omitempty"`
}

type deployment struct {
	Spec struct {
		Replicas any `json:"replicas,omitempty"`
		Strategy struct {
			Type          string `json:"type,omitempty"`
			RollingUpdate *struct {
				MaxUnavailable any `json:"maxUnavailable,omitempty"`
			} `json:"rollingUpdate,omitempty"`
		} `json:"strategy,omitzero"`
		Template struct {
			Spec podSpec `json:"spec,omitzero"`
		} `json:"template,omitzero"`
	} `json:"spec,omitzero"`
}

type podSpec struct {
	TerminationGracePeriodSeconds any              `json:"terminationGracePeriodSeconds,omitempty"`
	SecurityContext               *securityContext `json:"securityContext,omitempty"`
	InitContainers                []container      `json:"initContainers,omitempty"`
	Containers                    []container      `json:"containers,omitempty"`
	Volumes                       []volume         `json:"volumes,omitempty"`
}

type volume struct {
	Name   string `json:"name,omitempty"`
	Secret *struct {
		SecretName string `json:"secretName,omitempty"`
	} `json:"secret,omitempty"`
}

type container struct {
	Name            string           `json:"name,omitempty"`
	Image           string           `json:"image,omitempty"`
	Args            []string         `json:"args,omitempty"`
	Env             []envVar         `json:"env,omitempty"`
	Ports           []containerPort  `json:"ports,omitempty"`
	LivenessProbe   *probe           `json:"livenessProbe,omitempty"`
	ReadinessProbe  *probe           `json:"readinessProbe,omitempty"`
	Lifecycle       *lifecycle       `json:"lifecycle,omitempty"`
	VolumeMounts    []volumeMount    `json:"volumeMounts,omitempty"`
	SecurityContext *securityContext `json:"securityContext,omitempty"`
}

type containerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int    `json:"containerPort,omitempty"`
}

type lifecycle struct {
	PreStop *struct {
		Exec *execAction `json:"exec,omitempty"`
	} `json:"preStop,omitempty"`
}

type execAction struct {
	Command []string `json:"command,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name,omitempty"`
	MountPath string `json:"mountPath,omitempty"`
}

type envVar struct {
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `json:"name,omitempty"`
			Key  string `json:"key,omitempty"`
		} `json:"secretKeyRef,omitempty"`
	} `json:"valueFrom,omitempty"`
}

type probe struct {
	HTTPGet *struct {
		Path string `json:"path,omitempty"`
		Port any    `json:"port,omitempty"` // a name (string) or a number (float64)
	} `json:"httpGet,omitempty"`
	Exec *execAction `json:"exec,omitempty"`
}

type securityContext struct {
	RunAsNonRoot             *bool `json:"runAsNonRoot,omitempty"`
	AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation,omitempty"`
	ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem,omitempty"`
	Capabilities             *struct {
		Drop []string `json:"drop,omitempty"`
	} `json:"capabilities,omitempty"`
}

type service struct {
	Metadata metadata `json:"metadata,omitzero"`
	Spec     struct {
		Ports []servicePort `json:"ports,omitempty"`
	} `json:"spec,omitzero"`
}

type servicePort struct {
	Name       string `json:"name,omitempty"`
	Port       int    `json:"port,omitempty"`
	TargetPort any    `json:"targetPort,omitempty"` // a name (string) or a number (float64)
}

// load parses one embedded template.
func load(t *testing.T, file string) template {
	t.Helper()
	b, err := templates.FS.ReadFile(file)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", file, err)
	}
	var tpl template
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatalf("yaml.Unmarshal(%s): %v", file, err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("yaml.YAMLToJSON(%s): %v", file, err)
	}
	spelledAsTagged(t, file, j, tpl)
	return tpl
}

// decode finds the one object of kind in tpl and decodes it into v.
func decode(t *testing.T, tpl template, kind string, v any) {
	t.Helper()
	var found []json.RawMessage
	for _, raw := range tpl.Objects {
		var o object
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatalf("json.Unmarshal(object): %v", err)
		}
		if o.Kind == kind {
			found = append(found, raw)
		}
	}
	if len(found) != 1 {
		t.Fatalf("objects of kind %s = %d, want 1", kind, len(found))
	}
	if err := json.Unmarshal(found[0], v); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", kind, err)
	}
	spelledAsTagged(t, kind, found[0], v)
}

// spelledAsTagged reports every key that v, decoded from raw, holds but raw
// does not spell the same way.
func spelledAsTagged(t *testing.T, what string, raw []byte, v any) {
	t.Helper()
	var want, got any
	canon, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%s): %v", what, err)
	}
	if err := json.Unmarshal(canon, &want); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", what, err)
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", what, err)
	}
	for _, path := range missingKeys(want, got, what) {
		t.Errorf("%s: the YAML has no key spelled exactly so; check its case", path)
	}
}

// missingKeys lists the paths of the keys of want that got lacks.
func missingKeys(want, got any, path string) []string {
	var missing []string
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			gv, ok := g[k]
			if !ok {
				missing = append(missing, path+"."+k)
				continue
			}
			missing = append(missing, missingKeys(w[k], gv, path+"."+k)...)
		}
	case []any:
		g, _ := got.([]any)
		for i := range min(len(w), len(g)) {
			missing = append(missing, missingKeys(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return missing
}

// refPattern matches ${NAME} and ${{NAME}}, and malformed mixes of the two.
var refPattern = regexp.MustCompile(`\$\{\{?([^{}]*)\}\}?`)

// walkStrings calls fn with every string value under v and its path.
func walkStrings(v any, path string, fn func(path, s string)) {
	switch v := v.(type) {
	case string:
		fn(path, v)
	case []any:
		for i, e := range v {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walkStrings(v[k], path+"."+k, fn)
		}
	}
}

// expand replaces every parameter reference in s by the parameter's default.
func expand(t *testing.T, tpl template, s string) string {
	t.Helper()
	return refPattern.ReplaceAllStringFunc(s, func(ref string) string {
		name := refPattern.FindStringSubmatch(ref)[1]
		i := slices.IndexFunc(tpl.Parameters, func(p parameter) bool { return p.Name == name })
		if i < 0 {
			t.Errorf("expand(%q): parameter %s not declared", s, name)
			return ref
		}
		return tpl.Parameters[i].Value
	})
}

// intRef is the only string an integer field may hold: OpenShift turns it into
// a number, while ${PARAM} would stay a string and fail validation.
var intRef = regexp.MustCompile(`^\$\{\{[A-Z][A-Z0-9_]*\}\}$`)

// intValue reads an integer field written either literally or as ${{PARAM}}.
func intValue(t *testing.T, tpl template, v any, what string) int {
	t.Helper()
	switch v := v.(type) {
	case float64:
		return int(v)
	case string:
		if !intRef.MatchString(v) {
			t.Fatalf("%s = %q, want an integer or ${{PARAM}}", what, v)
		}
		n, err := strconv.Atoi(expand(t, tpl, v))
		if err != nil {
			t.Fatalf("%s = %q: %v", what, v, err)
		}
		return n
	}
	t.Fatalf("%s = %v (%T), want an integer", what, v, v)
	return 0
}

// setting returns the value c gives the flag, from its arguments or else its
// FLEET_MANAGER_ environment variable (the binary's order), with parameters
// expanded; def when c sets neither.
func setting(t *testing.T, tpl template, c container, flag, def string) string {
	t.Helper()
	for i, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return expand(t, tpl, v)
		}
		if a == "--"+flag && i+1 < len(c.Args) {
			return expand(t, tpl, c.Args[i+1])
		}
	}
	env := envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	for _, e := range c.Env {
		if e.Name == env {
			return expand(t, tpl, e.Value)
		}
	}
	return def
}

func portNamed(c container, name string) (int, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// serviceDeployment returns the service template's pod spec and its serve container.
func serviceDeployment(t *testing.T) (template, podSpec, container) {
	t.Helper()
	tpl := load(t, serviceFile)
	var d deployment
	decode(t, tpl, "Deployment", &d)
	pod := d.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c container) bool { return c.Name == "serve" })
	if i < 0 {
		t.Fatalf("Deployment has no container named serve")
	}
	return tpl, pod, pod.Containers[i]
}

func TestTemplateParameters(t *testing.T) {
	t.Parallel()
	// Parameters whose empty default means something (no CORS origin, a
	// generated route host, every zone served, no default zone, no read
	// replica, no metrics backend, the embedded allow-list) rather than
	// a value the deployer forgot.
	mayBeEmpty := map[string]bool{"CORS_ALLOWED_ORIGINS": true, "ROUTE_HOST": true,
		"SERVED_ZONES": true, "ZONE_DEPLOYMENTS": true, "REGISTRATION_DEFAULT_ZONE": true,
		// Amazon S3 needs no endpoint; an S3-compatible store does.
		"BACKUP_ENDPOINT_URL":  true,
		"DB_READ_REPLICA_HOST": true,
		// No metrics backend: the user-facing metrics serve the inventory's series only.
		"USER_METRICS_BACKEND_URL": true, "USER_METRICS_TENANT_HEADER": true, "USER_METRICS_TENANT": true,
		"USER_METRICS_BACKEND_TOKEN_FILE": true, "USER_METRICS_ALLOW_LIST_FILE": true}
	nameOK := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

	for _, file := range []string{serviceFile, dbFile, cnpgFile, cnpgRecoveryFile, monitoringFile} {
		t.Run(file, func(t *testing.T) {
			tpl := load(t, file)
			if tpl.APIVersion != "template.openshift.io/v1" || tpl.Kind != "Template" {
				t.Errorf("%s: apiVersion, kind = %q, %q, want template.openshift.io/v1, Template", file, tpl.APIVersion, tpl.Kind)
			}
			declared := map[string]parameter{}
			for _, p := range tpl.Parameters {
				if _, dup := declared[p.Name]; dup {
					t.Errorf("parameter %s declared twice", p.Name)
				}
				declared[p.Name] = p
				if p.Value == "" && p.Generate == "" && !p.Required && !mayBeEmpty[p.Name] {
					t.Errorf("parameter(%s) has no value and required = false, want required = true", p.Name)
				}
			}

			used := map[string]bool{}
			for i, raw := range tpl.Objects {
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatalf("json.Unmarshal(objects[%d]): %v", i, err)
				}
				walkStrings(v, fmt.Sprintf("objects[%d]", i), func(path, s string) {
					for _, m := range refPattern.FindAllStringSubmatch(s, -1) {
						ref, name := m[0], m[1]
						used[name] = true
						p, ok := declared[name]
						switch {
						case !nameOK.MatchString(name):
							t.Errorf("%s = %q: reference %q is not a parameter name", path, s, ref)
						case !ok:
							t.Errorf("%s = %q: parameter %s not declared", path, s, name)
						case strings.HasPrefix(ref, "${{") != strings.HasSuffix(ref, "}}"):
							t.Errorf("%s = %q: malformed reference %q", path, s, ref)
						case strings.HasPrefix(ref, "${{") && ref != s:
							t.Errorf("%s = %q: %s must be the whole value", path, s, ref)
						case strings.HasPrefix(ref, "${{"):
							if _, err := strconv.Atoi(p.Value); err != nil {
								t.Errorf("%s = %s: default %q is not an integer", path, ref, p.Value)
							}
						}
					}
				})
			}
			for _, p := range tpl.Parameters {
				if !used[p.Name] {
					t.Errorf("parameter %s declared but never used", p.Name)
				}
			}
		})
	}
}
