package templates_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/httpserve"
	"github.com/fleetmanager/fleet-manager/internal/rest"
)

// alwaysReady stands in for the database: the test asks whether the probe
// paths exist, not whether a database answers.
type alwaysReady struct{}

func (alwaysReady) Ready(context.Context) error { return nil }

// serveFlags are the flags of `fleet-manager serve` a deployment may set. An
// environment variable that names no flag is ignored by the binary, so a typo
// in the template would silently fall back to a default.
var serveFlags = []string{
	"api-bind-address", "metrics-bind-address", "health-bind-address", "secrets-dir",
	"service-name", "api-base-path", "error-code-prefix", "log-format", "log-level",
	"auth-jwks-url", "auth-issuers", "auth-audience", "cors-allowed-origins",
	"db-max-open-conns", "db-max-idle-conns", "shutdown-timeout", "encryption-key-file",
	"served-zones", "zone-deployments", "registration-default-zone",
	"db-read-replica-host", "db-read-replica-port", "db-read-max-staleness",
	"user-metrics-backend-url", "user-metrics-tenant-header", "user-metrics-tenant",
	"user-metrics-backend-token-file", "user-metrics-allow-list-file",
}

func TestServiceProbes(t *testing.T) {
	t.Parallel()
	tpl, _, serve := serviceDeployment(t)
	defaults := rest.DefaultConfig()
	healthPort := bindPort(t, setting(t, tpl, serve, "health-bind-address", defaults.HealthBindAddress))
	health := httptest.NewServer(httpserve.NewHealthHandler(alwaysReady{}, time.Second))
	defer health.Close()

	tests := []struct {
		name     string
		probe    *probe
		wantPath string
	}{
		{"liveness", serve.LivenessProbe, httpserve.LivenessPath},
		{"readiness", serve.ReadinessProbe, httpserve.ReadinessPath},
	}
	for _, tt := range tests {
		if tt.probe == nil || tt.probe.HTTPGet == nil {
			t.Errorf("probe(%s).httpGet missing", tt.name)
			continue
		}
		if got := tt.probe.HTTPGet.Path; got != tt.wantPath {
			t.Errorf("probe(%s).path = %q, want %q", tt.name, got, tt.wantPath)
		}
		// The path is one the real health server answers.
		if resp, err := http.Get(health.URL + tt.probe.HTTPGet.Path); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("health server GET %s = %v, %v; want 200", tt.probe.HTTPGet.Path, resp, err)
		} else {
			_ = resp.Body.Close()
		}
		name, ok := tt.probe.HTTPGet.Port.(string)
		if !ok {
			t.Errorf("probe(%s).port = %v, want a port name", tt.name, tt.probe.HTTPGet.Port)
			continue
		}
		port, ok := portNamed(serve, name)
		if !ok {
			t.Errorf("probe(%s).port = %q, want the name of a containerPort", tt.name, name)
			continue
		}
		if port != healthPort {
			t.Errorf("probe(%s).port %q = %d, want %d (--health-bind-address)", tt.name, name, port, healthPort)
		}
	}
}

func bindPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("net.SplitHostPort(%q): %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("bind address %q: port %q: %v", addr, p, err)
	}
	return n
}

func TestServicePorts(t *testing.T) {
	t.Parallel()
	tpl, _, serve := serviceDeployment(t)
	var svc service
	decode(t, tpl, "Service", &svc)

	tests := []struct {
		portName  string
		flag      string
		def       string
		inService bool
	}{
		{"api", "api-bind-address", rest.DefaultConfig().APIBindAddress, true},
		{"metrics", "metrics-bind-address", rest.DefaultConfig().MetricsBindAddress, true},
		{"health", "health-bind-address", rest.DefaultConfig().HealthBindAddress, false},
	}
	for _, tt := range tests {
		want := bindPort(t, setting(t, tpl, serve, tt.flag, tt.def))
		got, ok := portNamed(serve, tt.portName)
		if !ok {
			t.Errorf("containerPort(%s) missing", tt.portName)
		} else if got != want {
			t.Errorf("containerPort(%s) = %d, want %d (--%s)", tt.portName, got, want, tt.flag)
		}

		i := slices.IndexFunc(svc.Spec.Ports, func(p servicePort) bool { return p.Name == tt.portName })
		switch {
		case !tt.inService && i >= 0:
			t.Errorf("Service port %s exposed, want it only on the pod", tt.portName)
		case tt.inService && i < 0:
			t.Errorf("Service port %s missing", tt.portName)
		case tt.inService && svc.Spec.Ports[i].TargetPort != tt.portName:
			t.Errorf("Service port(%s).targetPort = %v, want %q", tt.portName, svc.Spec.Ports[i].TargetPort, tt.portName)
		}
	}

	var route struct {
		Spec struct {
			Port struct {
				TargetPort any `json:"targetPort,omitempty"`
			} `json:"port,omitzero"`
			TLS *struct {
				Termination string `json:"termination,omitempty"`
			} `json:"tls,omitempty"`
		} `json:"spec,omitzero"`
	}
	decode(t, tpl, "Route", &route)
	if got := route.Spec.Port.TargetPort; got != "api" {
		t.Errorf("Route.port.targetPort = %v, want %q", got, "api")
	}
	if route.Spec.TLS == nil || route.Spec.TLS.Termination != "edge" {
		t.Errorf("Route.tls = %+v, want termination edge", route.Spec.TLS)
	}
}

func TestServiceContainers(t *testing.T) {
	t.Parallel()
	tpl, pod, serve := serviceDeployment(t)
	if len(pod.InitContainers) != 1 {
		t.Fatalf("initContainers = %d, want 1 (migrate)", len(pod.InitContainers))
	}
	migrate := pod.InitContainers[0]
	secretVolumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil && expand(t, tpl, v.Secret.SecretName) == expand(t, tpl, "${DB_SECRET_NAME}") {
			secretVolumes[v.Name] = true
		}
	}

	tests := []struct {
		c       container
		wantCmd string
	}{
		{migrate, "migrate"},
		{serve, "serve"},
	}
	for _, tt := range tests {
		if len(tt.c.Args) == 0 || tt.c.Args[0] != tt.wantCmd {
			t.Errorf("container(%s).args = %q, want %q first", tt.c.Name, tt.c.Args, tt.wantCmd)
		}
		if tt.c.Image != serve.Image {
			t.Errorf("container(%s).image = %q, want %q (serve's)", tt.c.Name, tt.c.Image, serve.Image)
		}
		dir := setting(t, tpl, tt.c, "secrets-dir", "")
		if dir == "" {
			t.Errorf("container(%s) sets no --secrets-dir", tt.c.Name)
			continue
		}
		mounted := slices.ContainsFunc(tt.c.VolumeMounts, func(m volumeMount) bool {
			return m.MountPath == dir && secretVolumes[m.Name]
		})
		if !mounted {
			t.Errorf("container(%s): secret ${DB_SECRET_NAME} not mounted at --secrets-dir %q", tt.c.Name, dir)
		}
	}

	// migrate's log lines carry the service name serve's do.
	if got, want := setting(t, tpl, migrate, "service-name", ""), setting(t, tpl, serve, "service-name", ""); got == "" || got != want {
		t.Errorf("container(migrate) --service-name = %q, want serve's %q", got, want)
	}

	for _, e := range serve.Env {
		flag, ok := strings.CutPrefix(e.Name, envPrefix)
		flag = strings.ToLower(strings.ReplaceAll(flag, "_", "-"))
		if ok && !slices.Contains(serveFlags, flag) {
			t.Errorf("container(serve).env %s names no flag of serve", e.Name)
		}
	}
}

func TestServiceSecurityContext(t *testing.T) {
	t.Parallel()
	_, pod, _ := serviceDeployment(t)
	podNonRoot := pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
	if !podNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot = false, want true")
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container(%s).securityContext missing", c.Name)
			continue
		}
		checks := []struct {
			field string
			got   *bool
			want  bool
		}{
			{"runAsNonRoot", sc.RunAsNonRoot, true},
			{"allowPrivilegeEscalation", sc.AllowPrivilegeEscalation, false},
			{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem, true},
		}
		for _, ck := range checks {
			if ck.got == nil || *ck.got != ck.want {
				t.Errorf("container(%s).securityContext.%s = %v, want %v", c.Name, ck.field, deref(ck.got), ck.want)
			}
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container(%s).securityContext.capabilities = %+v, want drop ALL", c.Name, sc.Capabilities)
		}
	}
}

func deref(b *bool) any {
	if b == nil {
		return "unset"
	}
	return *b
}

func TestServiceShutdownFitsGracePeriod(t *testing.T) {
	t.Parallel()
	tpl, pod, serve := serviceDeployment(t)
	grace := time.Duration(intValue(t, tpl, pod.TerminationGracePeriodSeconds, "terminationGracePeriodSeconds")) * time.Second

	timeout, err := time.ParseDuration(setting(t, tpl, serve, "shutdown-timeout", ""))
	if err != nil {
		t.Fatalf("container(serve) --shutdown-timeout: %v", err)
	}
	var preStop time.Duration
	if l := serve.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Exec != nil {
		cmd := l.PreStop.Exec.Command
		if len(cmd) != 2 || cmd[0] != "sleep" {
			t.Fatalf("container(serve).preStop = %q, want [sleep <seconds>]", cmd)
		}
		n, err := strconv.Atoi(cmd[1])
		if err != nil {
			t.Fatalf("container(serve).preStop = %q: %v", cmd, err)
		}
		preStop = time.Duration(n) * time.Second
	}
	if grace <= preStop+timeout {
		t.Errorf("terminationGracePeriodSeconds = %v, want more than preStop %v + --shutdown-timeout %v", grace, preStop, timeout)
	}
}

func TestServiceRollingUpdate(t *testing.T) {
	t.Parallel()
	tpl := load(t, serviceFile)
	var d deployment
	decode(t, tpl, "Deployment", &d)
	s := d.Spec.Strategy
	if s.Type != "RollingUpdate" || s.RollingUpdate == nil {
		t.Fatalf("Deployment.strategy.type = %q, want RollingUpdate", s.Type)
	}
	if got := intValue(t, tpl, s.RollingUpdate.MaxUnavailable, "maxUnavailable"); got != 0 {
		t.Errorf("Deployment.strategy.rollingUpdate.maxUnavailable = %d, want 0", got)
	}
	if got := intValue(t, tpl, d.Spec.Replicas, "replicas"); got < 2 {
		t.Errorf("Deployment.replicas = %d by default, want at least 2 so that a rollout or a drain keeps serving", got)
	}
}

// TestServiceSetsEveryRequiredSetting: serve refuses to start without a
// master key, so the template must give one, from a mounted secret.
func TestServiceSetsEveryRequiredSetting(t *testing.T) {
	t.Parallel()
	tpl, _, serve := serviceDeployment(t)
	keyFile := setting(t, tpl, serve, "encryption-key-file", "")
	if keyFile == "" {
		t.Fatalf("container(serve) sets no --encryption-key-file; serve would refuse to start")
	}
	dir := keyFile[:strings.LastIndex(keyFile, "/")]
	mounted := false
	for _, m := range serve.VolumeMounts {
		if m.MountPath == dir {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("--encryption-key-file %s is not in a mounted volume", keyFile)
	}
}
