package hubkind_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hub/hubtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// served is what a CRD says of one kind at one served version.
type served struct {
	resource   string
	namespaced bool
}

// apiServerKinds are the declared kinds the API server serves itself,
// without a CRD: what those must match.
var apiServerKinds = map[schema.GroupVersionKind]served{
	{Version: "v1", Kind: "Namespace"}: {resource: "namespaces"},
	{Version: "v1", Kind: "Secret"}:    {resource: "secrets", namespaced: true},

	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: {resource: "customresourcedefinitions"},
}

// hubCRDs returns what the CRDs the test hub installs serve, by group,
// version and kind.
func hubCRDs(t *testing.T) map[schema.GroupVersionKind]served {
	t.Helper()
	crds, err := hubtest.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[schema.GroupVersionKind]served{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
				out[gvk] = served{resource: crd.Spec.Names.Plural, namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}
			}
		}
	}
	return out
}

// TestKindsMatchTheHub: every declared kind is served, at its version, with
// its resource and scope, by a hub CRD or by the API server itself; no kind
// is declared twice.
func TestKindsMatchTheHub(t *testing.T) {
	t.Parallel()
	crds := hubCRDs(t)
	seen := map[schema.GroupKind]bool{}
	for _, k := range hubkind.All() {
		if seen[k.GVK().GroupKind()] {
			t.Errorf("All(): %s twice", k.GVK().GroupKind())
		}
		seen[k.GVK().GroupKind()] = true
		want, ok := crds[k.GVK()]
		if builtin, isBuiltin := apiServerKinds[k.GVK()]; isBuiltin {
			want, ok = builtin, true
		}
		if !ok {
			t.Errorf("%s: no hub CRD serves it, nor the API server", k.GVK())
			continue
		}
		if k.Resource != want.resource || k.Namespaced != want.namespaced {
			t.Errorf("%s: resource %s, namespaced %v; the hub serves %s, namespaced %v",
				k.GVK(), k.Resource, k.Namespaced, want.resource, want.namespaced)
		}
	}
}

// TestAllListsEveryKind: each Kind variable of the package is in All() and
// named after its kind, so TestKindsMatchTheHub sees every one.
func TestAllListsEveryKind(t *testing.T) {
	t.Parallel()
	file, err := parser.ParseFile(token.NewFileSet(), "hubkind.go", nil, 0)
	if err != nil {
		t.Fatalf("ParseFile(hubkind.go): %v", err)
	}
	var declared []string
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) && isKindLiteral(vs.Values[i]) {
					declared = append(declared, name.Name)
				}
			}
		}
	}
	var listed []string
	for _, k := range hubkind.All() {
		listed = append(listed, k.Kind)
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if !slices.Equal(declared, listed) {
		t.Errorf("Kind variables %v; All() lists the kinds %v: each variable is named after its kind and listed once", declared, listed)
	}
}

// isKindLiteral reports whether e is a Kind{...} literal.
func isKindLiteral(e ast.Expr) bool {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	id, ok := lit.Type.(*ast.Ident)
	return ok && id.Name == "Kind"
}

// TestReportedKindsAreHubKinds: each kind of the domain's registry of
// reported kinds is a declared hub kind, with the same version, resource and
// scope, and a hub CRD serves it.
func TestReportedKindsAreHubKinds(t *testing.T) {
	t.Parallel()
	crds := hubCRDs(t)
	for _, r := range fleet.ResourceKinds() {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		i := slices.IndexFunc(hubkind.All(), func(k hubkind.Kind) bool { return k.Group == r.Group && k.Kind == r.Kind })
		if i < 0 {
			t.Errorf("fleet.ResourceKinds(): %s is not declared in internal/hubkind", gvk)
			continue
		}
		k := hubkind.All()[i]
		if k.Version != r.Version || k.Resource != r.Resource || k.Namespaced != r.Namespaced {
			t.Errorf("fleet.ResourceKinds(): %s resource %s, namespaced %v; hubkind.%s is %s, resource %s, namespaced %v",
				gvk, r.Resource, r.Namespaced, k.Kind, k.GVK(), k.Resource, k.Namespaced)
		}
		if want, ok := crds[gvk]; !ok || want.resource != r.Resource {
			t.Errorf("fleet.ResourceKinds(): %s resource %s; the hub CRDs serve %+v (found %v)", gvk, r.Resource, want, ok)
		}
	}
}

// TestRenderedObjectsAreHubKinds: what the domain renders for a hub, a
// registration's objects and a policy's, is only of declared kinds.
func TestRenderedObjectsAreHubKinds(t *testing.T) {
	t.Parallel()
	reg := fleet.Registration{ID: "0a1b2c3d-0000-0000-0000-00000000abcd", OrgID: "org-1", Name: "c1"}
	objects := fleet.DesiredObjects(reg, "hub-1", &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1\nkind: Config\n"})
	policy := fleet.Policy{ID: "0a1b2c3d-0000-0000-0000-00000000dcba", OrgID: "org-1", Name: "p1",
		Body: map[string]any{"metadata": map[string]any{"name": "p1"}, "spec": map[string]any{}}}
	objects = append(objects, fleet.PolicyHubObjects(policy, "hub-1", false, fleet.PolicyHubConfig{Namespace: "policies", ClusterSet: "global"}).Objects...)
	kinds := map[string]bool{}
	for _, o := range objects {
		obj, err := hubkind.ToUnstructured(o)
		if err != nil {
			t.Fatalf("ToUnstructured(%v): %v", o, err)
		}
		if !slices.ContainsFunc(hubkind.All(), func(k hubkind.Kind) bool { return k.Is(obj) }) {
			t.Errorf("the domain renders %s %s, not a declared hub kind", obj.GetAPIVersion(), obj.GetKind())
		}
		kinds[obj.GetKind()] = true
	}
	for _, want := range []string{"Namespace", "ManagedCluster", "KlusterletAddonConfig", "Secret", "ManagedClusterSetBinding", "Policy", "Placement", "PlacementBinding"} {
		if !kinds[want] {
			t.Errorf("the rendered objects hold no %s: the test no longer covers it", want)
		}
	}
}
