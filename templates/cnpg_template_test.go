package templates_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
)

const (
	cnpgFile         = "cnpg-template.yml"
	cnpgRecoveryFile = "cnpg-recovery-template.yml"

	// cnpgCRDDir holds the database operator's CRDs, upstream files that
	// scripts/crds.sh pins (its README names the version).
	cnpgCRDDir = "testdata/cnpg-crds"
)

var cnpgGVRs = map[string]schema.GroupVersionResource{
	"Secret":          {Version: "v1", Resource: "secrets"},
	"Cluster":         {Group: "postgresql.cnpg.io", Version: "v1", Resource: "clusters"},
	"ScheduledBackup": {Group: "postgresql.cnpg.io", Version: "v1", Resource: "scheduledbackups"},
}

// cnpgParams are what a deployer gives both templates: the parameters
// without a default.
var cnpgParams = map[string]string{
	"BACKUP_DESTINATION_PATH": "s3://fleet-manager-backups/prod",
}

const recoveryTarget = "2026-12-02T10:15:00Z"

func recoveryParams() map[string]string {
	p := maps.Clone(cnpgParams)
	p["RECOVERY_TARGET_TIME"] = recoveryTarget
	return p
}

// TestCNPGTemplateServesTheServiceSecret reads the processed production
// template: the secret the service mounts, the cluster's use of it, backups,
// and the PodMonitor.
func TestCNPGTemplateServesTheServiceSecret(t *testing.T) {
	t.Parallel()
	objs := process(t, cnpgFile, cnpgParams)
	if got, want := kinds(objs), []string{"Cluster", "PodMonitor", "ScheduledBackup", "Secret"}; !slices.Equal(got, want) {
		t.Fatalf("kinds = %v, want %v", got, want)
	}
	cluster, secret := only(t, objs, "Cluster"), only(t, objs, "Secret")
	svcTpl := load(t, serviceFile)
	svcSecret := expand(t, svcTpl, "${DB_SECRET_NAME}")

	if secret.GetName() != svcSecret {
		t.Errorf("Secret name = %q, want the service template's DB_SECRET_NAME %q", secret.GetName(), svcSecret)
	}
	if got := field[string](t, secret, "type"); got != "kubernetes.io/basic-auth" {
		t.Errorf("Secret type = %q, want kubernetes.io/basic-auth (the operator's owner secret)", got)
	}
	data := field[map[string]any](t, secret, "stringData")
	for _, k := range []string{"db.host", "db.port", "db.name", "db.user", "db.password", "db.sslmode", "username", "password"} {
		if s, _ := data[k].(string); s == "" {
			t.Errorf("Secret stringData[%s] empty or missing", k)
		}
	}
	if data["db.host"] != cluster.GetName()+"-rw" {
		t.Errorf("db.host = %v, want %s-rw, the Service that follows the primary", data["db.host"], cluster.GetName())
	}
	if data["db.port"] != "5432" {
		t.Errorf("db.port = %v, want 5432", data["db.port"])
	}
	if data["username"] != data["db.user"] || data["password"] != data["db.password"] {
		t.Errorf("username/password = %v/%v, want db.user/db.password %v/%v: the operator and the service must agree",
			data["username"], data["password"], data["db.user"], data["db.password"])
	}
	switch data["db.sslmode"] {
	case "require", "verify-ca", "verify-full":
	default:
		t.Errorf("db.sslmode = %v, want TLS (require or verify-*)", data["db.sslmode"])
	}

	initdb := field[map[string]any](t, cluster, "spec", "bootstrap", "initdb")
	if initdb["database"] != data["db.name"] || initdb["owner"] != data["db.user"] {
		t.Errorf("bootstrap.initdb database/owner = %v/%v, want db.name/db.user %v/%v", initdb["database"], initdb["owner"], data["db.name"], data["db.user"])
	}
	if got := field[string](t, cluster, "spec", "bootstrap", "initdb", "secret", "name"); got != secret.GetName() {
		t.Errorf("bootstrap.initdb.secret.name = %q, want %q", got, secret.GetName())
	}
	checkClusterBasics(t, cluster)
	checkMaxConnections(t, cluster, svcTpl)
	checkScheduledBackup(t, only(t, objs, "ScheduledBackup"), cluster)
	checkPodMonitor(t, only(t, objs, "PodMonitor"), cluster)
}

// checkClusterBasics checks what makes the Cluster production-worthy.
func checkClusterBasics(t *testing.T, cluster *unstructured.Unstructured) {
	t.Helper()
	if got := field[int64](t, cluster, "spec", "instances"); got != 3 {
		t.Errorf("instances = %d, want 3", got)
	}
	if n := field[int64](t, cluster, "spec", "postgresql", "synchronous", "number"); n < 1 {
		t.Errorf("postgresql.synchronous.number = %d, want at least 1 (no acknowledged write lost on failover)", n)
	}
	store := field[map[string]any](t, cluster, "spec", "backup", "barmanObjectStore")
	if store["destinationPath"] != cnpgParams["BACKUP_DESTINATION_PATH"] {
		t.Errorf("barmanObjectStore.destinationPath = %v, want %s", store["destinationPath"], cnpgParams["BACKUP_DESTINATION_PATH"])
	}
	for _, key := range []string{"accessKeyId", "secretAccessKey"} {
		ref := field[map[string]any](t, cluster, "spec", "backup", "barmanObjectStore", "s3Credentials", key)
		if ref["name"] == "" || ref["key"] == "" {
			t.Errorf("s3Credentials.%s = %v, want a secret name and key", key, ref)
		}
	}
	field[string](t, cluster, "spec", "backup", "barmanObjectStore", "wal", "compression")
	field[string](t, cluster, "spec", "backup", "retentionPolicy")
	if v, ok, _ := unstructured.NestedBool(cluster.Object, "spec", "monitoring", "enablePodMonitor"); ok && v {
		t.Errorf("monitoring.enablePodMonitor = true: it is deprecated, declare the PodMonitor instead")
	}
	image := field[string](t, cluster, "spec", "imageName")
	if _, tag, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":"); !strings.Contains(image, "@sha256:") && !strings.Contains(tag, ".") {
		t.Errorf("imageName = %q, want a minor release (15.N) or a digest: a moving tag updates PostgreSQL unplanned", image)
	}
}

// checkMaxConnections holds the rule of docs/operations.md against the
// service template's defaults: every replica during a rollout, its pool and
// its LISTEN connection, plus room for migrate, rotate-keys, monitoring and
// admins, and PostgreSQL's superuser_reserved_connections.
func checkMaxConnections(t *testing.T, cluster *unstructured.Unstructured, svcTpl template) {
	t.Helper()
	const others, reserved = 10, 3
	replicas, err1 := strconv.Atoi(expand(t, svcTpl, "${REPLICAS}"))
	pool, err2 := strconv.Atoi(expand(t, svcTpl, "${DB_MAX_OPEN_CONNS}"))
	maxConns, err3 := strconv.Atoi(field[string](t, cluster, "spec", "postgresql", "parameters", "max_connections"))
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatalf("max_connections check: %v", err)
	}
	if need := (replicas+1)*(pool+1) + others + reserved; need > maxConns {
		t.Errorf("max_connections = %d, want at least %d: (REPLICAS %d + 1) x (DB_MAX_OPEN_CONNS %d + 1) + %d others + %d reserved",
			maxConns, need, replicas, pool, others, reserved)
	}
	params := field[map[string]any](t, cluster, "spec", "postgresql", "parameters")
	// The service sets these per connection; a server default would hide a
	// forgotten flag and bind other clients (pg_dump, admins) too.
	for _, p := range []string{"statement_timeout", "lock_timeout", "plan_cache_mode"} {
		if v, ok := params[p]; ok {
			t.Errorf("postgresql.parameters.%s = %v: fleet-manager sets it per connection (internal/postgres/config.go)", p, v)
		}
	}
}

func checkScheduledBackup(t *testing.T, sb, cluster *unstructured.Unstructured) {
	t.Helper()
	if got := field[string](t, sb, "spec", "cluster", "name"); got != cluster.GetName() {
		t.Errorf("ScheduledBackup cluster.name = %q, want %q", got, cluster.GetName())
	}
	if got := field[string](t, sb, "spec", "method"); got != "barmanObjectStore" {
		t.Errorf("ScheduledBackup method = %q, want barmanObjectStore", got)
	}
	if fields := strings.Fields(field[string](t, sb, "spec", "schedule")); len(fields) != 6 {
		t.Errorf("ScheduledBackup schedule has %d fields, want 6 (seconds first)", len(fields))
	}
}

// podMonitor is the part of the Prometheus Operator's PodMonitor the
// template uses. The test hub has no CRD of monitoring.coreos.com, so the
// PodMonitor is not applied to the API server: it is decoded strictly into
// this type (a misspelled field fails) and its selector is compared with the
// labels the operator gives its instance pods. That is a structural check,
// not the Prometheus Operator's schema.
type podMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port string `json:"port"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

func checkPodMonitor(t *testing.T, obj, cluster *unstructured.Unstructured) {
	t.Helper()
	var pm podMonitor
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &pm, true); err != nil {
		t.Fatalf("PodMonitor: %v", err)
	}
	if pm.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("PodMonitor apiVersion = %q, want monitoring.coreos.com/v1", pm.APIVersion)
	}
	want := map[string]string{"cnpg.io/cluster": cluster.GetName(), "cnpg.io/podRole": "instance"}
	if !maps.Equal(pm.Spec.Selector.MatchLabels, want) {
		t.Errorf("PodMonitor selector = %v, want %v (the operator's instance pods)", pm.Spec.Selector.MatchLabels, want)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port != "metrics" {
		t.Errorf("PodMonitor podMetricsEndpoints = %+v, want the port named metrics", pm.Spec.PodMetricsEndpoints)
	}
}

// TestCNPGRecoveryTemplateMatchesTheProductionOne checks the recovery
// template: the same Cluster but for its bootstrap from the production
// cluster's backups up to a target time.
func TestCNPGRecoveryTemplateMatchesTheProductionOne(t *testing.T) {
	t.Parallel()
	prod := process(t, cnpgFile, cnpgParams)
	rec := process(t, cnpgRecoveryFile, recoveryParams())
	if got, want := kinds(rec), []string{"Cluster", "PodMonitor", "ScheduledBackup"}; !slices.Equal(got, want) {
		t.Fatalf("recovery template kinds = %v, want %v (it reuses the production secret)", got, want)
	}
	prodCluster, recCluster := only(t, prod, "Cluster"), only(t, rec, "Cluster")
	source := field[string](t, recCluster, "spec", "bootstrap", "recovery", "source")
	if source != prodCluster.GetName() {
		t.Errorf("bootstrap.recovery.source = %q, want the production cluster %q", source, prodCluster.GetName())
	}
	if recCluster.GetName() == source {
		t.Errorf("recovered cluster named %q like its source: the operator refuses to archive into the source's WAL archive", source)
	}
	target := field[string](t, recCluster, "spec", "bootstrap", "recovery", "recoveryTarget", "targetTime")
	// The CRD takes any string here; PostgreSQL would find out at restore.
	if _, err := time.Parse(time.RFC3339, target); err != nil || target != recoveryTarget {
		t.Errorf("recoveryTarget.targetTime = %q (%v), want %s", target, err, recoveryTarget)
	}
	prodSecret := only(t, prod, "Secret").GetName()
	if got := field[string](t, recCluster, "spec", "bootstrap", "recovery", "secret", "name"); got != prodSecret {
		t.Errorf("bootstrap.recovery.secret.name = %q, want the production secret %q", got, prodSecret)
	}
	for _, k := range []string{"database", "owner"} {
		if got, want := field[string](t, recCluster, "spec", "bootstrap", "recovery", k),
			field[string](t, prodCluster, "spec", "bootstrap", "initdb", k); got != want {
			t.Errorf("bootstrap.recovery.%s = %q, want initdb's %q", k, got, want)
		}
	}
	ext := field[[]any](t, recCluster, "spec", "externalClusters")
	if len(ext) != 1 {
		t.Fatalf("externalClusters = %d, want 1", len(ext))
	}
	e := &unstructured.Unstructured{Object: ext[0].(map[string]any)}
	if got := field[string](t, e, "name"); got != source {
		t.Errorf("externalClusters[0].name = %q, want the recovery source %q", got, source)
	}
	if got := field[string](t, e, "barmanObjectStore", "serverName"); got != source {
		t.Errorf("externalClusters[0].barmanObjectStore.serverName = %q, want %q, the folder the source archives to", got, source)
	}
	prodStore := field[map[string]any](t, prodCluster, "spec", "backup", "barmanObjectStore")
	extStore := field[map[string]any](t, e, "barmanObjectStore")
	for _, k := range []string{"destinationPath", "endpointURL", "s3Credentials"} {
		if !reflect.DeepEqual(extStore[k], prodStore[k]) {
			t.Errorf("externalClusters[0].barmanObjectStore.%s = %v, want the production backup's %v", k, extStore[k], prodStore[k])
		}
	}

	// Everything else is the production template's, so the two cannot drift.
	strip := func(c *unstructured.Unstructured) map[string]any {
		spec := field[map[string]any](t, c.DeepCopy(), "spec")
		delete(spec, "bootstrap")
		delete(spec, "externalClusters")
		return spec
	}
	if a, b := strip(prodCluster), strip(recCluster); !reflect.DeepEqual(a, b) {
		t.Errorf("Cluster specs differ beyond bootstrap and externalClusters:\nproduction %v\nrecovery   %v", a, b)
	}
	for _, kind := range []string{"ScheduledBackup", "PodMonitor"} {
		p, r := only(t, prod, kind), only(t, rec, kind)
		if !reflect.DeepEqual(renamed(p, prodCluster.GetName(), recCluster.GetName()), r.Object) {
			t.Errorf("%s differs from the production one beyond the cluster's name:\nproduction %v\nrecovery   %v", kind, p.Object, r.Object)
		}
	}
	checkClusterBasics(t, recCluster)
	checkScheduledBackup(t, only(t, rec, "ScheduledBackup"), recCluster)
	checkPodMonitor(t, only(t, rec, "PodMonitor"), recCluster)
}

// renamed returns obj's content with every string equal to from replaced by to.
func renamed(obj *unstructured.Unstructured, from, to string) map[string]any {
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			if v == from {
				return to
			}
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		}
		return v
	}
	return walk(obj.DeepCopy().Object).(map[string]any)
}

// cnpgHub returns a dynamic client for the test hub with the CloudNativePG
// CRDs installed and established, and a new namespace.
func cnpgHub(t *testing.T) (dynamic.Interface, string) {
	t.Helper()
	hub := hubtest.Start(t)
	installed.Do(func() {
		opts := envtest.CRDInstallOptions{Paths: []string{cnpgCRDDir}, ErrorIfPathMissing: true}
		if err := envtest.ReadCRDFiles(&opts); err != nil || len(opts.CRDs) == 0 {
			installErr = fmt.Errorf("no CRD read from %s: %v", cnpgCRDDir, err)
			return
		}
		cfg := hub.RESTConfig()
		// The upstream CRDs draw schema warnings that say nothing about the templates.
		cfg.WarningHandler = rest.NoWarnings{}
		_, installErr = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			CRDs: opts.CRDs, MaxTime: time.Minute, PollInterval: 50 * time.Millisecond,
		})
	})
	if installErr != nil {
		t.Fatalf("installing the CloudNativePG CRDs: %v", installErr)
	}
	client := hub.NewDynamicFor(t)
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": "cnpg-"},
	}}
	created, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).
		Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create(Namespace): %v", err)
	}
	return client, created.GetName()
}

var (
	installed  sync.Once
	installErr error
)

// create creates obj in ns with strict field validation, so that a field the
// CRD does not know is refused rather than dropped.
func create(ctx context.Context, client dynamic.Interface, ns string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvr, ok := cnpgGVRs[obj.GetKind()]
	if !ok {
		return nil, fmt.Errorf("create: no resource known for kind %s", obj.GetKind())
	}
	return client.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
}

// TestCNPGTemplatesApplyToTheAPIServer creates the objects of both templates
// on a real kube-apiserver with the operator's own CRDs, so that its OpenAPI
// schema checks them, and reads them back.
func TestCNPGTemplatesApplyToTheAPIServer(t *testing.T) {
	t.Parallel()
	client, ns := cnpgHub(t)
	ctx := t.Context()
	for _, c := range []struct {
		file   string
		params map[string]string
	}{{cnpgFile, cnpgParams}, {cnpgRecoveryFile, recoveryParams()}} {
		for _, obj := range process(t, c.file, c.params) {
			if obj.GetKind() == "PodMonitor" {
				continue // no CRD for it here: checkPodMonitor checks it structurally
			}
			if _, err := create(ctx, client, ns, obj); err != nil {
				t.Errorf("%s: create %s %s: %v", c.file, obj.GetKind(), obj.GetName(), err)
				continue
			}
			got, err := client.Resource(cnpgGVRs[obj.GetKind()]).Namespace(ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: get %s %s: %v", c.file, obj.GetKind(), obj.GetName(), err)
				continue
			}
			checkReadBack(t, c.file, obj, got)
		}
	}
}

// checkReadBack compares the fields that matter of what was sent and what
// the API server stored; a field the schema pruned would be missing.
func checkReadBack(t *testing.T, file string, sent, got *unstructured.Unstructured) {
	t.Helper()
	var paths [][]string
	switch sent.GetKind() {
	case "Secret":
		paths = [][]string{{"type"}}
		// stringData is folded into data on write.
		data := field[map[string]any](t, got, "data")
		for _, k := range slices.Sorted(maps.Keys(field[map[string]any](t, sent, "stringData"))) {
			if _, ok := data[k]; !ok {
				t.Errorf("%s: Secret %s stored without key %s", file, got.GetName(), k)
			}
		}
	case "Cluster":
		paths = [][]string{
			{"spec", "instances"}, {"spec", "imageName"}, {"spec", "bootstrap"}, {"spec", "postgresql", "parameters"},
			{"spec", "postgresql", "synchronous"}, {"spec", "backup", "barmanObjectStore"}, {"spec", "storage"},
			{"spec", "walStorage"}, {"spec", "affinity"},
		}
		if file == cnpgRecoveryFile {
			paths = append(paths, []string{"spec", "externalClusters"})
		}
		// A default of the operator's schema, which the template leaves out:
		// the API server applied that schema.
		if lvl := field[string](t, got, "spec", "logLevel"); lvl != "info" {
			t.Errorf("%s: Cluster spec.logLevel = %q, want the CRD's default info", file, lvl)
		}
	case "ScheduledBackup":
		paths = [][]string{{"spec"}}
	}
	for _, p := range paths {
		s, _, _ := unstructured.NestedFieldNoCopy(sent.Object, p...)
		g, _, _ := unstructured.NestedFieldNoCopy(got.Object, p...)
		if !containsAll(g, s) {
			t.Errorf("%s: %s %s: %s stored as %v, sent %v", file, sent.GetKind(), sent.GetName(), strings.Join(p, "."), g, s)
		}
	}
}

// containsAll reports whether got holds everything of want (got may hold
// defaults besides).
func containsAll(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !containsAll(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !containsAll(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// TestCNPGSchemaRefusesWrongValues shows that the check above has teeth:
// each change below, made to an object the API server accepts, is refused by
// the operator's schema.
func TestCNPGSchemaRefusesWrongValues(t *testing.T) {
	t.Parallel()
	client, ns := cnpgHub(t)
	objs := process(t, cnpgFile, cnpgParams)
	for i, c := range []struct {
		kind, what string
		path       []string
		value      any
	}{
		{"Cluster", "instances as a word", []string{"spec", "instances"}, "three"},
		{"Cluster", "no instance", []string{"spec", "instances"}, int64(0)},
		{"Cluster", "unknown WAL compression", []string{"spec", "backup", "barmanObjectStore", "wal", "compression"}, "rar"},
		{"Cluster", "retention not <n>[dwm]", []string{"spec", "backup", "retentionPolicy"}, "30 days"},
		{"Cluster", "unknown data durability", []string{"spec", "postgresql", "synchronous", "dataDurability"}, "sometimes"},
		{"Cluster", "unknown update strategy", []string{"spec", "primaryUpdateStrategy"}, "automatic"},
		{"Cluster", "memory limit not a quantity", []string{"spec", "resources", "limits", "memory"}, "lots"},
		{"Cluster", "misspelled field", []string{"spec", "backup", "barmanObjectstore"}, map[string]any{"destinationPath": "s3://x"}},
		{"Cluster", "a parameter not a string", []string{"spec", "postgresql", "parameters", "max_connections"}, int64(100)},
		{"ScheduledBackup", "unknown method", []string{"spec", "method"}, "tape"},
		{"ScheduledBackup", "unknown owner reference", []string{"spec", "backupOwnerReference"}, "nobody"},
	} {
		t.Run(c.what, func(t *testing.T) {
			ctx := t.Context()
			good := only(t, objs, c.kind).DeepCopy()
			good.SetName(fmt.Sprintf("good-%d", i))
			if _, err := create(ctx, client, ns, good); err != nil {
				t.Fatalf("create %s unchanged: %v; want it accepted", c.kind, err)
			}
			bad := only(t, objs, c.kind).DeepCopy()
			bad.SetName(fmt.Sprintf("bad-%d", i))
			if err := unstructured.SetNestedField(bad.Object, c.value, c.path...); err != nil {
				t.Fatalf("SetNestedField: %v", err)
			}
			_, err := create(ctx, client, ns, bad)
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("create %s with %s = %v: %v, want refused as invalid", c.kind, strings.Join(c.path, "."), c.value, err)
			}
			if field := c.path[len(c.path)-1]; !strings.Contains(err.Error(), field) {
				t.Errorf("refusal %q does not name %s", err, field)
			}
		})
	}
}
