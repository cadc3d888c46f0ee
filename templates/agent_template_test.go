package templates_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/httpserve"
)

const (
	agentFile      = "agent-template.yml"
	agentEnvPrefix = "FLEETSHARD_SYNC_"
)

type policyRule struct {
	APIGroups       []string `json:"apiGroups,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	Verbs           []string `json:"verbs,omitempty"`
	ResourceNames   []string `json:"resourceNames,omitempty"`
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

type clusterRole struct {
	Metadata        metadata     `json:"metadata,omitzero"`
	Rules           []policyRule `json:"rules,omitempty"`
	AggregationRule any          `json:"aggregationRule,omitempty"`
}

type clusterRoleBinding struct {
	RoleRef struct {
		APIGroup string `json:"apiGroup,omitempty"`
		Kind     string `json:"kind,omitempty"`
		Name     string `json:"name,omitempty"`
	} `json:"roleRef,omitzero"`
	Subjects []struct {
		Kind      string `json:"kind,omitempty"`
		Name      string `json:"name,omitempty"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"subjects,omitempty"`
}

// agentPod holds what the agent's Deployment says beyond the shared types.
type agentPod struct {
	Spec struct {
		Template struct {
			Spec struct {
				ServiceAccountName           string `json:"serviceAccountName,omitempty"`
				AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken,omitempty"`
				Containers                   []struct {
					Name      string   `json:"name,omitempty"`
					Command   []string `json:"command,omitempty"`
					Resources struct {
						Requests map[string]string `json:"requests,omitempty"`
						Limits   map[string]string `json:"limits,omitempty"`
					} `json:"resources,omitzero"`
				} `json:"containers,omitempty"`
			} `json:"spec,omitzero"`
		} `json:"template,omitzero"`
	} `json:"spec,omitzero"`
}

// agentDeployment returns the agent template, its Deployment and its container.
func agentDeployment(t *testing.T) (template, deployment, container) {
	t.Helper()
	tpl := load(t, agentFile)
	var d deployment
	decode(t, tpl, "Deployment", &d)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].Name != "agent" {
		t.Fatalf("Deployment containers = %v, want one named agent", pod.Containers)
	}
	return tpl, d, pod.Containers[0]
}

// agentSetting is setting for FLEETSHARD_SYNC_ variables.
func agentSetting(t *testing.T, tpl template, c container, flag, def string) string {
	t.Helper()
	env := agentEnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	for _, e := range c.Env {
		if e.Name == env {
			return expand(t, tpl, e.Value)
		}
	}
	return def
}

// agentFlags returns the flags of `fleetshard-sync run`.
func agentFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	cfg := agent.DefaultConfig()
	cfg.AddFlags(fs)
	fs.String("log-format", "json", "")
	fs.String("log-level", "info", "")
	return fs
}

func TestAgentTemplateParameters(t *testing.T) {
	t.Parallel()
	tpl := load(t, agentFile)
	if tpl.APIVersion != "template.openshift.io/v1" || tpl.Kind != "Template" {
		t.Errorf("apiVersion, kind = %q, %q, want template.openshift.io/v1, Template", tpl.APIVersion, tpl.Kind)
	}
	// Empty defaults that mean "not used": one of the two ways to authenticate.
	mayBeEmpty := map[string]bool{"TOKEN_FILE": true, "OIDC_TOKEN_URL": true, "OIDC_CLIENT_ID": true,
		"OIDC_CLIENT_SECRET_FILE": true, "OIDC_AUDIENCE": true, "OIDC_SCOPES": true}
	declared := map[string]bool{}
	for _, p := range tpl.Parameters {
		if declared[p.Name] {
			t.Errorf("parameter %s declared twice", p.Name)
		}
		declared[p.Name] = true
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
				used[m[1]] = true
				if !declared[m[1]] {
					t.Errorf("%s = %q: parameter %s not declared", path, s, m[1])
				}
				if strings.HasPrefix(m[0], "${{") != strings.HasSuffix(m[0], "}}") {
					t.Errorf("%s = %q: malformed reference %q", path, s, m[0])
				}
			}
		})
	}
	for _, p := range tpl.Parameters {
		if !used[p.Name] {
			t.Errorf("parameter %s declared but never used", p.Name)
		}
	}
}

// wantAgentRules is the agent's whole access to the hub outside its own
// namespace. The agent's hub tests (internal/agent) run under the
// template's ClusterRole, so a verb missing here fails them.
var wantAgentRules = []policyRule{
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"register.open-cluster-management.io"}, Resources: []string{"managedclusters/accept"}, Verbs: []string{"update"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "create", "patch", "delete"}},
	{APIGroups: []string{"agent.open-cluster-management.io"}, Resources: []string{"klusterletaddonconfigs"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "patch"}},
	{APIGroups: []string{"internal.open-cluster-management.io"}, Resources: []string{"managedclusterinfos"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersets", "placementdecisions"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"policy.open-cluster-management.io"}, Resources: []string{"policies"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"placements"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"policy.open-cluster-management.io"}, Resources: []string{"placementbindings"}, Verbs: []string{"list", "create", "patch", "delete"}},
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersetbindings"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersets/bind"}, Verbs: []string{"create"}},
	{APIGroups: []string{"hive.openshift.io"}, Resources: []string{"clusterdeployments"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"hive.openshift.io"}, Resources: []string{"machinepools"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"hive.openshift.io"}, Resources: []string{"clusterimagesets"}, Verbs: []string{"list", "create", "patch", "delete"}},
	{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"}, Verbs: []string{"list", "watch", "create", "patch"}},
}

// wantLeaseRules is the agent's Role in its own namespace: the lease that
// lets one agent of the hub act at a time, and no other.
var wantLeaseRules = []policyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"${NAME}"}, Verbs: []string{"get", "update"}},
}

// grants flattens rules to group/resource/verb triples.
func grants(rules []policyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestAgentClusterRoleIsLeastPrivilege(t *testing.T) {
	t.Parallel()
	tpl := load(t, agentFile)
	var role clusterRole
	decode(t, tpl, "ClusterRole", &role)
	if role.AggregationRule != nil {
		t.Errorf("ClusterRole has an aggregationRule, want explicit rules only")
	}
	for i, r := range role.Rules {
		for field, values := range map[string][]string{"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs} {
			if slices.ContainsFunc(values, func(v string) bool { return strings.Contains(v, "*") }) {
				t.Errorf("rules[%d].%s = %v: a wildcard", i, field, values)
			}
			if len(values) == 0 {
				t.Errorf("rules[%d].%s is empty", i, field)
			}
		}
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("rules[%d] = %+v, want no nonResourceURLs or resourceNames", i, r)
		}
		for _, v := range r.Verbs {
			if v == "escalate" || v == "bind" || v == "impersonate" {
				t.Errorf("rules[%d] grants %s", i, v)
			}
		}
	}
	if got, want := grants(role.Rules), grants(wantAgentRules); !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole grants\n%s\nwant exactly\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every kind of the resource database is listed and watched by an informer.
	for _, k := range fleet.SyncedResourceKinds() {
		for _, v := range []string{"list", "watch"} {
			if g := k.Group + "/" + k.Resource + ":" + v; !slices.Contains(grants(role.Rules), g) {
				t.Errorf("ClusterRole does not grant %s, which the %s informer needs", g, k.Kind)
			}
		}
	}

	var binding clusterRoleBinding
	decode(t, tpl, "ClusterRoleBinding", &binding)
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Metadata.Name || binding.RoleRef.APIGroup != "rbac.authorization.k8s.io" {
		t.Errorf("ClusterRoleBinding.roleRef = %+v, want the ClusterRole %s", binding.RoleRef, role.Metadata.Name)
	}
	var sa struct {
		Metadata metadata `json:"metadata,omitzero"`
	}
	decode(t, tpl, "ServiceAccount", &sa)
	var pod agentPod
	decode(t, tpl, "Deployment", &pod)
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa.Metadata.Name ||
		binding.Subjects[0].Namespace != "${NAMESPACE}" || pod.Spec.Template.Spec.ServiceAccountName != sa.Metadata.Name {
		t.Errorf("ClusterRoleBinding.subjects = %+v, pod serviceAccountName %q; want the ServiceAccount %s in ${NAMESPACE}, the pod's",
			binding.Subjects, pod.Spec.Template.Spec.ServiceAccountName, sa.Metadata.Name)
	}
	if a := pod.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || !*a {
		t.Errorf("automountServiceAccountToken = %v, want true: the agent reaches the hub in-cluster", a)
	}
}

// TestAgentLeaseRole checks the Role of the lease: it grants the lease the
// container is configured with, to the pod's ServiceAccount.
func TestAgentLeaseRole(t *testing.T) {
	t.Parallel()
	tpl, _, c := agentDeployment(t)
	var role clusterRole
	decode(t, tpl, "Role", &role)
	if !reflect.DeepEqual(role.Rules, wantLeaseRules) {
		t.Errorf("Role rules = %+v, want %+v", role.Rules, wantLeaseRules)
	}
	var binding clusterRoleBinding
	decode(t, tpl, "RoleBinding", &binding)
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Metadata.Name || binding.RoleRef.APIGroup != "rbac.authorization.k8s.io" {
		t.Errorf("RoleBinding.roleRef = %+v, want the Role %s", binding.RoleRef, role.Metadata.Name)
	}
	var pod agentPod
	decode(t, tpl, "Deployment", &pod)
	if sa := pod.Spec.Template.Spec.ServiceAccountName; len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != sa || binding.Subjects[0].Namespace != "${NAMESPACE}" {
		t.Errorf("RoleBinding.subjects = %+v, want the pod's ServiceAccount %s in ${NAMESPACE}", binding.Subjects, sa)
	}
	// The lease the agent takes is the one the Role names, in the namespace
	// the Role is processed into.
	for flag, want := range map[string]string{"lease-name": expand(t, tpl, "${NAME}"), "lease-namespace": expand(t, tpl, "${NAMESPACE}")} {
		if got := agentSetting(t, tpl, c, flag, ""); got != want {
			t.Errorf("--%s in the template = %q, want %q", flag, got, want)
		}
	}
}

// TestAgentStopsWithinGracePeriod checks that the agent's shutdown bound
// leaves the kubelet time before it kills the pod: the lease is released
// and the process exits on its own.
func TestAgentStopsWithinGracePeriod(t *testing.T) {
	t.Parallel()
	tpl, d, c := agentDeployment(t)
	grace := time.Duration(intValue(t, tpl, d.Spec.Template.Spec.TerminationGracePeriodSeconds, "terminationGracePeriodSeconds")) * time.Second
	setting := agentSetting(t, tpl, c, "shutdown-timeout", agentFlags().Lookup("shutdown-timeout").DefValue)
	timeout, err := time.ParseDuration(setting)
	if err != nil {
		t.Fatalf("--shutdown-timeout in the template = %q: %v", setting, err)
	}
	const headroom = 5 * time.Second
	if timeout+headroom > grace {
		t.Errorf("--shutdown-timeout %s + %s > terminationGracePeriodSeconds %s: the pod would be killed before the agent stops", timeout, headroom, grace)
	}
}

func TestAgentProbesAndPorts(t *testing.T) {
	t.Parallel()
	tpl, _, c := agentDeployment(t)
	defaults := agent.DefaultConfig()
	health := httptest.NewServer(httpserve.NewHealthHandler(alwaysReady{}, time.Second))
	defer health.Close()

	for _, p := range []struct{ name, flag, def string }{
		{"health", "health-bind-address", defaults.HealthBindAddress},
		{"metrics", "metrics-bind-address", defaults.MetricsBindAddress},
	} {
		want := bindPort(t, agentSetting(t, tpl, c, p.flag, p.def))
		if want != bindPort(t, p.def) {
			t.Errorf("--%s in the template = %d, want the agent's default %s", p.flag, want, p.def)
		}
		if got, ok := portNamed(c, p.name); !ok || got != want {
			t.Errorf("containerPort(%s) = %d, %v, want %d (--%s)", p.name, got, ok, want, p.flag)
		}
	}
	for _, pr := range []struct {
		name     string
		probe    *probe
		wantPath string
	}{{"liveness", c.LivenessProbe, httpserve.LivenessPath}, {"readiness", c.ReadinessProbe, httpserve.ReadinessPath}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("probe(%s).httpGet missing", pr.name)
			continue
		}
		if pr.probe.HTTPGet.Path != pr.wantPath || pr.probe.HTTPGet.Port != "health" {
			t.Errorf("probe(%s) = %s on %v, want %s on health", pr.name, pr.probe.HTTPGet.Path, pr.probe.HTTPGet.Port, pr.wantPath)
		}
		// The path is one the health server the agent runs answers.
		if resp, err := http.Get(health.URL + pr.probe.HTTPGet.Path); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("health server GET %s = %v, %v; want 200", pr.probe.HTTPGet.Path, resp, err)
		} else {
			_ = resp.Body.Close()
		}
	}
}

func TestAgentDeployment(t *testing.T) {
	t.Parallel()
	tpl, d, c := agentDeployment(t)
	if n := intValue(t, tpl, d.Spec.Replicas, "replicas"); n != 1 {
		t.Errorf("replicas = %d, want 1: two agents would fight over one hub", n)
	}
	if d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("strategy = %q, want Recreate: the old agent stops before the new one starts", d.Spec.Strategy.Type)
	}
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("args = %v, want run", c.Args)
	}
	sc := d.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot = %v, want true", sc)
	}
	csc := c.SecurityContext
	if csc == nil || deref(csc.RunAsNonRoot) != true || deref(csc.AllowPrivilegeEscalation) != false || deref(csc.ReadOnlyRootFilesystem) != true ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("container securityContext = %+v, want non-root, no privilege escalation, read-only root, all capabilities dropped", csc)
	}
	var pod agentPod
	decode(t, tpl, "Deployment", &pod)
	// The image's entrypoint is fleet-manager; the agent is its other binary.
	if cmd := pod.Spec.Template.Spec.Containers[0].Command; len(cmd) != 1 || path.Base(cmd[0]) != "fleetshard-sync" {
		t.Errorf("command = %v, want the fleetshard-sync binary", cmd)
	}
	res := pod.Spec.Template.Spec.Containers[0].Resources
	for _, k := range []string{"cpu", "memory"} {
		if res.Requests[k] == "" || res.Limits[k] == "" {
			t.Errorf("resources %s: requests %q, limits %q; want both", k, res.Requests[k], res.Limits[k])
		}
	}

	// The credentials Secret is mounted where the token file is read.
	mount := ""
	for _, m := range c.VolumeMounts {
		if m.Name == "auth" {
			mount = m.MountPath
		}
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v volume) bool { return v.Name == "auth" })
	if mount == "" || i < 0 || d.Spec.Template.Spec.Volumes[i].Secret == nil || d.Spec.Template.Spec.Volumes[i].Secret.SecretName != "${AUTH_SECRET_NAME}" {
		t.Errorf("auth volume = mount %q, volume %d; want the Secret ${AUTH_SECRET_NAME} mounted", mount, i)
	}
	if tf := agentSetting(t, tpl, c, "token-file", ""); !strings.HasPrefix(tf, mount+"/") {
		t.Errorf("--token-file = %q, want a file of the Secret mounted at %s", tf, mount)
	}
}

// TestAgentTemplateConfiguresTheAgent feeds the container's environment,
// with the parameters' defaults and sample values for the required ones, to
// the agent's own flags and validation, as the binary does.
func TestAgentTemplateConfiguresTheAgent(t *testing.T) {
	t.Parallel()
	tpl, _, c := agentDeployment(t)
	samples := map[string]string{"FLEET_MANAGER_URL": "https://fleet.example.com/api/fleet_manager/v1", "HUB_ID": "hub-1"}
	for name, v := range samples {
		i := slices.IndexFunc(tpl.Parameters, func(p parameter) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("parameter %s missing", name)
		}
		tpl.Parameters[i].Value = v
	}
	env := map[string]string{}
	fs := agentFlags()
	for _, e := range c.Env {
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(e.Name, agentEnvPrefix), "_", "-"))
		if !strings.HasPrefix(e.Name, agentEnvPrefix) || fs.Lookup(flag) == nil {
			t.Errorf("env %s sets no flag of fleetshard-sync run; the binary would ignore it", e.Name)
		}
		env[e.Name] = expand(t, tpl, e.Value)
	}
	cfg := agent.DefaultConfig()
	fs = pflag.NewFlagSet("run", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	var logFormat, logLevel string
	fs.StringVar(&logFormat, "log-format", "json", "")
	fs.StringVar(&logLevel, "log-level", "info", "")
	if err := config.BindEnv(fs, agentEnvPrefix, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatalf("BindEnv(template env): %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the template's defaults do not configure a valid agent: %v", err)
	}
	if logFormat != "json" || logLevel != "info" {
		t.Errorf("log format, level = %q, %q, want json, info", logFormat, logLevel)
	}
}
