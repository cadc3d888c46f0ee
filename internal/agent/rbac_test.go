package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/templates"
)

// The RBAC kinds of the agent's template.
var rbacGVRs = map[string]schema.GroupVersionResource{
	"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
}

// deploySeq keeps the names of one test binary's deployments distinct.
var deploySeq atomic.Int64

// agentAccount is the agent's identity on the test hub as
// templates/agent-template.yml deploys it: its ServiceAccount with the
// template's ClusterRole and Role, bound as the template binds them. The
// hub's admin impersonates the ServiceAccount, so every request of the agent
// is authorised by the template's rules and nothing else.
type agentAccount struct {
	name      string // the template's NAME: every object's, the lease's too
	namespace string // the template's NAMESPACE
	config    *rest.Config
}

// deployAgentAccount processes the template's ServiceAccount and RBAC objects
// with a NAME and NAMESPACE of their own, creates them on the test hub, and
// waits until the hub authorises the account.
func deployAgentAccount(t testing.TB) agentAccount {
	t.Helper()
	h := hubtest.Start(t)
	admin := h.NewDynamicFor(t)
	ctx := context.Background()
	name := fmt.Sprintf("fleetshard-sync-%d-%x", deploySeq.Add(1), time.Now().UnixNano()&0xffffffff)
	acct := agentAccount{name: name, namespace: name}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": acct.namespace}}}
	if _, err := admin.Resource(namespaceGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create(namespace %s): %v", acct.namespace, err)
	}
	for _, obj := range agentTemplateObjects(t, map[string]string{"NAME": acct.name, "NAMESPACE": acct.namespace}) {
		gvr, ok := rbacGVRs[obj.GetKind()]
		if !ok {
			continue
		}
		var r dynamic.ResourceInterface = admin.Resource(gvr)
		if !strings.HasPrefix(obj.GetKind(), "Cluster") {
			r = admin.Resource(gvr).Namespace(acct.namespace)
		}
		if _, err := r.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create(%s %s): %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = r.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	}
	acct.config = h.RESTConfig()
	acct.config.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + acct.namespace + ":" + acct.name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + acct.namespace, "system:authenticated"},
	}
	// The authoriser learns of new bindings from a watch: wait until it has.
	as, err := dynamic.NewForConfig(acct.config)
	if err != nil {
		t.Fatal(err)
	}
	gomega.NewWithT(t).Eventually(func() error {
		_, err := as.Resource(managedClusterGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Succeed(), "the template's ClusterRole bound to %s", acct.name)
	return acct
}

// kubeconfig writes a kubeconfig that reaches the test hub as the account,
// for code that reads one as a deployment would.
func (acct agentAccount) kubeconfig(t testing.TB) string {
	t.Helper()
	c := acct.config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: c.BearerToken, Impersonate: c.Impersonate.UserName, ImpersonateGroups: c.Impersonate.Groups}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "agent", Namespace: acct.namespace}
	cfg.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("WriteToFile(%s): %v", path, err)
	}
	return path
}

// grant binds an extra ClusterRole with rules to the account, as an operator
// would for a kind the template does not know.
func (acct agentAccount) grant(t testing.TB, rules ...map[string]any) {
	t.Helper()
	admin := hubtest.Start(t).NewDynamicFor(t)
	name := acct.name + "-extra"
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": toAnySlice(rules),
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": acct.name, "namespace": acct.namespace}},
	}}
	for _, obj := range []*unstructured.Unstructured{role, binding} {
		r := admin.Resource(rbacGVRs[obj.GetKind()])
		if _, err := r.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create(%s %s): %v", obj.GetKind(), name, err)
		}
		t.Cleanup(func() { _ = r.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
}

func toAnySlice(ms []map[string]any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// agentTemplateObjects returns the objects of templates/agent-template.yml
// with the parameters params replaced.
func agentTemplateObjects(t testing.TB, params map[string]string) []*unstructured.Unstructured {
	t.Helper()
	data, err := templates.FS.ReadFile("agent-template.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Objects []json.RawMessage `json:"objects"`
	}
	if err := yaml.Unmarshal(data, &tpl); err != nil {
		t.Fatalf("yaml.Unmarshal(agent-template.yml): %v", err)
	}
	var out []*unstructured.Unstructured
	for i, raw := range tpl.Objects {
		s := string(raw)
		for k, v := range params {
			s = strings.ReplaceAll(s, "${"+k+"}", v)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatalf("agent-template.yml objects[%d]: %v", i, err)
		}
		out = append(out, obj)
	}
	return out
}

// TestAgentAccountIsNotAdmin checks the harness: the account the agent's
// hub tests run as is refused what the template does not grant.
func TestAgentAccountIsNotAdmin(t *testing.T) {
	t.Parallel()
	acct := deployAgentAccount(t)
	as, err := dynamic.NewForConfig(acct.config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"list configmaps", func() error { _, err := as.Resource(configMaps).List(ctx, metav1.ListOptions{}); return err }},
		{"list secrets", func() error { _, err := as.Resource(secretGVR).List(ctx, metav1.ListOptions{}); return err }},
		{"update a ManagedCluster", func() error {
			_, err := as.Resource(managedClusterGVR).Update(ctx, managedCluster(t, "not-there", nil, ""), metav1.UpdateOptions{})
			return err
		}},
	} {
		if err := c.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s = %v, want forbidden", c.what, acct.config.Impersonate.UserName, err)
		}
	}
	var status *apierrors.StatusError
	if _, err := as.Resource(managedClusterGVR).List(ctx, metav1.ListOptions{Limit: 1}); errors.As(err, &status) {
		t.Errorf("list ManagedClusters as %s = %v, want allowed", acct.config.Impersonate.UserName, err)
	}
}

// AgentHubAccount is deployAgentAccount for the external tests of the
// package: the test hub reached as the template's ServiceAccount, and the
// lease its Role grants.
func AgentHubAccount(t testing.TB) (cfg *rest.Config, leaseName, leaseNamespace string) {
	t.Helper()
	acct := deployAgentAccount(t)
	return acct.config, acct.name, acct.namespace
}

// useAccount configures cfg for the lease of acct, with short durations so
// that a takeover fits in a test.
func useAccount(cfg *Config, acct agentAccount) {
	cfg.LeaseName, cfg.LeaseNamespace = acct.name, acct.namespace
	cfg.LeaseDuration, cfg.LeaseRenewDeadline, cfg.LeaseRetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
}
