package agent

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// The hub tests share one API server; each runs its own agent for a hub id of
// its own, and an agent owns only the objects labelled with its hub's id.
// The OIDC tests share one Hydra.
func TestMain(m *testing.M) {
	code := m.Run()
	hubtest.Stop()
	hydratest.Stop()
	os.Exit(code)
}

// uniqueHubID returns a hub id no other test uses.
func uniqueHubID(prefix string) string {
	return fmt.Sprintf("%s-%x", prefix, time.Now().UnixNano())
}

var klusterletAddonConfigGVR = hubkind.KlusterletAddonConfig.GVR()

// desiredRegistration renders a registration's hub objects as the fleet
// manager does, in the private API's shape.
func desiredRegistration(t *testing.T, reg fleet.Registration, hubID string, creds *fleet.ImportCredentials) private.DesiredRegistration {
	t.Helper()
	objects := rawObjects(t, fleet.DesiredObjects(reg, hubID, creds)...)
	return private.DesiredRegistration{RegistrationId: reg.ID, Generation: 1, ManagedClusterName: fleet.ManagedClusterName(reg), Objects: objects}
}

// runAgentOnHub starts an agent on the test hub under an account of its own
// with the template's RBAC, and stops it when the test ends.
func runAgentOnHub(t *testing.T, f *fakeFleet) *Agent {
	t.Helper()
	return runAgentAs(t, f, deployAgentAccount(t))
}

// runAgentAs starts an agent on the test hub as acct, reaching the hub
// through a kubeconfig file as in a deployment, and stops it when the test
// ends.
func runAgentAs(t *testing.T, f *fakeFleet, acct agentAccount) *Agent {
	t.Helper()
	a, stop := startAgentAs(t, f, acct, time.Now().UnixNano())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
	return a
}

func get(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	if ns == "" {
		return c.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	}
	return c.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

func TestAgentAppliesAndRemovesDesiredObjects(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	admin := hubtest.Start(t).NewDynamicFor(t)
	f := newFakeFleetFor(t, uniqueHubID("hub"))
	a := runAgentOnHub(t, f)

	suffix := fmt.Sprintf("%x", time.Now().UnixNano())[6:]
	reg := fleet.Registration{ID: "3f0c2a7e-0000-4000-8000-" + fmt.Sprintf("%012s", suffix), OrgID: "org-1", Name: "alpha", Labels: map[string]string{"env": "test"}}
	name := fleet.ManagedClusterName(reg)
	rev := f.setDesired(desiredRegistration(t, reg, f.hubID, &fleet.ImportCredentials{APIURL: "https://api.alpha.example.com:6443", Token: "sha256~token"}))

	// Every object appears, with the labels that let the agent find it again.
	g.Eventually(func() error {
		_, err := get(ctx, admin, secretGVR, name, fleet.AutoImportSecretName)
		return err
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
	mc, err := get(ctx, admin, managedClusterGVR, "", name)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"env": "test", fleet.LabelRegistrationID: reg.ID, fleet.LabelOrgID: "org-1", fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelHubID: f.hubID} {
		if got := mc.GetLabels()[k]; got != v {
			t.Errorf("ManagedCluster %s label %s = %q, want %q", name, k, got, v)
		}
	}
	if accepts, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); !accepts {
		t.Errorf("ManagedCluster %s spec.hubAcceptsClient = false, want true", name)
	}
	if !slices.ContainsFunc(mc.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == "fleetshard-sync" && e.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Errorf("ManagedCluster %s managed fields = %v, want an Apply by fleetshard-sync", name, mc.GetManagedFields())
	}
	ns, err := get(ctx, admin, namespaceGVR, "", name)
	if err != nil || ns.GetLabels()[fleet.LabelRegistrationID] != reg.ID {
		t.Errorf("namespace %s = %v, %v, want it labelled with the registration", name, ns, err)
	}
	if _, err := get(ctx, admin, klusterletAddonConfigGVR, name, name); err != nil {
		t.Errorf("KlusterletAddonConfig %s/%s: %v", name, name, err)
	}
	secret, _ := get(ctx, admin, secretGVR, name, fleet.AutoImportSecretName)
	if tok, _, _ := unstructured.NestedString(secret.Object, "data", "token"); tok != base64.StdEncoding.EncodeToString([]byte("sha256~token")) {
		t.Errorf("auto-import-secret data.token = %q, want the credentials' token", tok)
	}

	// The revision is acknowledged once applied, and the new cluster is reported.
	g.Eventually(f.appliedRevision).WithTimeout(10 * time.Second).Should(gomega.Equal(rev))
	g.Eventually(func() []string { up, _ := upserted(f.inventoryBatches()); return up }).WithTimeout(10 * time.Second).Should(gomega.ContainElement(name))
	g.Eventually(func() bool { _, ok := latestItem(f.registrationItems(), reg.ID); return ok }).WithTimeout(10 * time.Second).Should(gomega.BeTrue())

	// Another hub's agent's cluster, on the same API server: never touched.
	foreign := managedCluster(t, name+"-other", map[string]string{
		fleet.LabelManagedBy: fleet.ManagedByAgent, fleet.LabelRegistrationID: "other-reg", fleet.LabelHubID: "other-hub",
	}, "")
	foreign.SetResourceVersion("")
	foreign.SetUID("")
	if _, err := admin.Resource(managedClusterGVR).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Removal: RHACM's finalizer holds the cluster; the revision waits for it.
	hold := `{"metadata": {"finalizers": ["test.fleet-manager.io/hold"]}}`
	if _, err := admin.Resource(managedClusterGVR).Patch(ctx, name, types.MergePatchType, []byte(hold), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rev2 := f.setDesired()
	g.Eventually(func() bool {
		mc, err := get(ctx, admin, managedClusterGVR, "", name)
		return err == nil && mc.GetDeletionTimestamp() != nil
	}).WithTimeout(30 * time.Second).Should(gomega.BeTrue())
	if got := f.appliedRevision(); got >= rev2 {
		t.Errorf("applied revision while the ManagedCluster is still there = %d, want below %d", got, rev2)
	}
	if ns, err := get(ctx, admin, namespaceGVR, "", name); err != nil || ns.GetDeletionTimestamp() != nil {
		t.Errorf("namespace %s while its ManagedCluster is still there: %v, %v; want it untouched", name, ns, err)
	}
	release := `{"metadata": {"finalizers": null}}`
	if _, err := admin.Resource(managedClusterGVR).Patch(ctx, name, types.MergePatchType, []byte(release), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() bool {
		_, err := get(ctx, admin, managedClusterGVR, "", name)
		return apierrors.IsNotFound(err)
	}).WithTimeout(30 * time.Second).Should(gomega.BeTrue())
	// No namespace controller here: deleted means Terminating.
	g.Eventually(func() bool {
		ns, err := get(ctx, admin, namespaceGVR, "", name)
		return apierrors.IsNotFound(err) || err == nil && ns.GetDeletionTimestamp() != nil
	}).WithTimeout(30 * time.Second).Should(gomega.BeTrue())
	g.Eventually(f.appliedRevision).WithTimeout(10 * time.Second).Should(gomega.Equal(rev2))
	g.Expect(f.desiredSinces()).To(gomega.ContainElement(rev), "the removal came in a delta from the revision the agent held")
	if _, err := get(ctx, admin, managedClusterGVR, "", foreign.GetName()); err != nil {
		t.Errorf("another hub's ManagedCluster %s after the removal pass: %v, want it kept", foreign.GetName(), err)
	}
	_ = admin.Resource(managedClusterGVR).Delete(ctx, foreign.GetName(), metav1.DeleteOptions{})
	g.Eventually(func() []string { _, del := upserted(f.inventoryBatches()); return del }).WithTimeout(10 * time.Second).Should(gomega.ContainElement(name))

	if err := a.Ready(ctx); err != nil {
		t.Errorf("Ready() = %v, want nil", err)
	}
}

func TestAgentReportsInventory(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	admin := hubtest.Start(t).NewDynamicFor(t)
	f := newFakeFleetFor(t, uniqueHubID("hub"))
	runAgentOnHub(t, f)

	// At start, a full resync ends with a last batch.
	g.Eventually(func() bool {
		return slices.ContainsFunc(f.inventoryBatches(), func(b private.InventoryBatch) bool { return b.Full && b.Last })
	}).WithTimeout(30 * time.Second).Should(gomega.BeTrue())

	// A cluster made on the hub directly (not a registration) is reported, with its status.
	name := fmt.Sprintf("direct-%x", time.Now().UnixNano())
	mc := managedCluster(t, name, map[string]string{"vendor": "OpenShift"}, "")
	mc.SetResourceVersion("")
	mc.SetUID("")
	if _, err := admin.Resource(managedClusterGVR).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := `{"status": {"capacity": {"cpu": "8", "memory": "32Gi", "core_worker": "8"}, "allocatable": {"cpu": "7500m", "memory": "30Gi"},
		"clusterClaims": [{"name": "id.openshift.io", "value": "abc"}], "version": {"kubernetes": "v1.31.6"},
		"conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "ManagedClusterAvailable", "message": "ok", "lastTransitionTime": "2026-11-30T09:00:00Z"}]}}`
	if _, err := admin.Resource(managedClusterGVR).Patch(ctx, name, types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() *private.ManagedClusterSummary {
		var last *private.ManagedClusterSummary
		for _, b := range f.inventoryBatches() {
			for _, s := range b.Upserts {
				if s.Name == name {
					last = &s
				}
			}
		}
		if last == nil || last.Capacity == nil || last.KubernetesVersion == nil {
			return nil
		}
		return last
	}).WithTimeout(15 * time.Second).Should(gomega.And(
		gomega.Not(gomega.BeNil()),
		gomega.WithTransform(func(s *private.ManagedClusterSummary) map[string]string { return *s.Capacity },
			gomega.Equal(map[string]string{"cpu": "8", "memory": "32Gi", "core_worker": "8"})),
		gomega.WithTransform(func(s *private.ManagedClusterSummary) map[string]string { return *s.Claims },
			gomega.Equal(map[string]string{"id.openshift.io": "abc"})),
	))

	// Its deletion is reported as a name.
	if err := admin.Resource(managedClusterGVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() []string { _, del := upserted(f.inventoryBatches()); return del }).WithTimeout(15 * time.Second).Should(gomega.ContainElement(name))

	// A resync the fleet manager asks for comes with a new generation.
	gens := func() map[int64]bool {
		m := map[int64]bool{}
		for _, b := range f.inventoryBatches() {
			if b.Full && b.Last {
				m[b.Generation] = true
			}
		}
		return m
	}
	before := len(gens())
	f.requestResync()
	g.Eventually(func() int { return len(gens()) }).WithTimeout(15 * time.Second).Should(gomega.BeNumerically(">", before))
}

func TestAgentReportsImportMaterial(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	admin := hubtest.Start(t).NewDynamicFor(t)
	f := newFakeFleetFor(t, uniqueHubID("hub"))
	runAgentOnHub(t, f)

	suffix := fmt.Sprintf("%012x", time.Now().UnixNano())[:12]
	reg := fleet.Registration{ID: "7a1d9c44-0000-4000-8000-" + suffix, OrgID: "org-2", Name: "beta"}
	name := fleet.ManagedClusterName(reg)
	f.setDesired(desiredRegistration(t, reg, f.hubID, nil))
	g.Eventually(func() bool { _, ok := latestItem(f.registrationItems(), reg.ID); return ok }).WithTimeout(30 * time.Second).Should(gomega.BeTrue())
	if _, err := get(ctx, admin, secretGVR, name, fleet.AutoImportSecretName); !apierrors.IsNotFound(err) {
		t.Errorf("auto-import-secret without credentials: %v, want not found", err)
	}

	// RHACM's import controller makes <name>-import once the cluster is accepted.
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name + "-import", "namespace": name},
		"data": map[string]any{
			"import.yaml": base64.StdEncoding.EncodeToString([]byte("kind: Klusterlet\n")),
			"crds.yaml":   base64.StdEncoding.EncodeToString([]byte("kind: CustomResourceDefinition\n")),
		},
	}}
	if _, err := admin.Resource(secretGVR).Namespace(name).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() string {
		it, _ := latestItem(f.registrationItems(), reg.ID)
		if it.Import == nil {
			return ""
		}
		return it.Import.Manifests
	}).WithTimeout(15 * time.Second).Should(gomega.Equal("kind: CustomResourceDefinition\n---\nkind: Klusterlet\n"))

	// The hub's conditions reach the registration status.
	status := `{"status": {"conditions": [
		{"type": "HubAcceptedManagedCluster", "status": "True", "reason": "HubClusterAdminAccepted", "message": "accepted", "lastTransitionTime": "2026-11-30T09:00:00Z"},
		{"type": "ManagedClusterJoined", "status": "True", "reason": "ManagedClusterJoined", "message": "joined", "lastTransitionTime": "2026-11-30T09:01:00Z"},
		{"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "ManagedClusterAvailable", "message": "ok", "lastTransitionTime": "2026-11-30T09:02:00Z"}]}}`
	if _, err := admin.Resource(managedClusterGVR).Patch(ctx, name, types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() []private.ConditionStatus {
		it, _ := latestItem(f.registrationItems(), reg.ID)
		var out []private.ConditionStatus
		for _, c := range it.Conditions {
			out = append(out, c.Status)
		}
		return out
	}).WithTimeout(15 * time.Second).Should(gomega.Equal([]private.ConditionStatus{private.True, private.True}))

	// Credentials given after the cluster joined: RHACM would import it again
	// from an auto-import-secret, so the agent leaves that one out.
	rev := f.setDesired(desiredRegistration(t, reg, f.hubID, &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1\nkind: Config\n"}))
	g.Eventually(f.appliedRevision).WithTimeout(15 * time.Second).Should(gomega.Equal(rev))
	if _, err := get(ctx, admin, secretGVR, name, fleet.AutoImportSecretName); !apierrors.IsNotFound(err) {
		t.Errorf("auto-import-secret of a joined cluster: %v, want not found", err)
	}
}

var crdGVR = hubkind.CustomResourceDefinition.GVR()

// TestAgentAppliesKindsInstalledLater installs a CRD after the agent cached
// the hub's discovery: the next desired set using it still applies.
func TestAgentAppliesKindsInstalledLater(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := t.Context()
	admin := hubtest.Start(t).NewDynamicFor(t)
	f := newFakeFleetFor(t, uniqueHubID("hub"))
	acct := deployAgentAccount(t)
	runAgentAs(t, f, acct)

	suffix := fmt.Sprintf("%x", time.Now().UnixNano())
	reg := fleet.Registration{ID: "5e2b1c00-0000-4000-8000-" + suffix[len(suffix)-12:], OrgID: "org-3", Name: "gamma"}
	first := desiredRegistration(t, reg, f.hubID, nil)
	rev := f.setDesired(first)
	g.Eventually(f.appliedRevision).WithTimeout(30 * time.Second).Should(gomega.Equal(rev))

	group := "w" + suffix + ".test.fleet-manager.io"
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Cluster",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if _, err := admin.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}) })
	g.Eventually(func() bool {
		got, err := admin.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		return slices.ContainsFunc(conds, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == "Established" && m["status"] == "True"
		})
	}).WithTimeout(30 * time.Second).Should(gomega.BeTrue())

	// A kind the template does not know needs a grant of its own.
	acct.grant(t, map[string]any{"apiGroups": []any{group}, "resources": []any{"widgets"}, "verbs": []any{"create", "patch"}})
	widget := map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w-" + suffix, "labels": map[string]any{fleet.LabelHubID: f.hubID}},
		"spec":     map[string]any{"size": int64(3)}}
	first.Objects = append(first.Objects, rawObjects(t, widget)...)
	rev = f.setDesired(first)
	g.Eventually(f.appliedRevision).WithTimeout(30 * time.Second).Should(gomega.Equal(rev))
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := admin.Resource(widgets).Get(ctx, "w-"+suffix, metav1.GetOptions{}); err != nil {
		t.Errorf("Widget w-%s after the set holding it was applied: %v", suffix, err)
	}
}
