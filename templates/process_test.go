package templates_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/templates"
)

// generated matches the one generator expression the templates use.
var generated = regexp.MustCompile(`^\[a-zA-Z0-9\]\{([0-9]+)\}$`)

// processTemplate does what `oc process` does with one of the templates: each
// parameter takes its given value, else its default, else a generated one; a
// required parameter left empty is an error, and so is a given parameter the
// template does not declare. ${NAME} is replaced inside strings, ${{NAME}}
// replaces the whole string with the value as JSON (a number, a boolean).
func processTemplate(file string, params map[string]string) ([]*unstructured.Unstructured, error) {
	b, err := templates.FS.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("processTemplate(%s): %w", file, err)
	}
	var tpl struct {
		Parameters []struct {
			Name     string `json:"name"`
			Value    string `json:"value"`
			Generate string `json:"generate"`
			From     string `json:"from"`
			Required bool   `json:"required"`
		} `json:"parameters"`
		Objects []json.RawMessage `json:"objects"`
	}
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		return nil, fmt.Errorf("processTemplate(%s): %w", file, err)
	}
	values := map[string]string{}
	for _, p := range tpl.Parameters {
		v, given := params[p.Name]
		switch {
		case given:
		case p.Value != "":
			v = p.Value
		case p.Generate == "expression":
			m := generated.FindStringSubmatch(p.From)
			if m == nil {
				return nil, fmt.Errorf("processTemplate(%s): parameter %s: cannot generate from %q", file, p.Name, p.From)
			}
			n, _ := strconv.Atoi(m[1])
			v = randomAlnum(n)
		}
		if v == "" && p.Required {
			return nil, fmt.Errorf("processTemplate(%s): parameter %s is required and has no value", file, p.Name)
		}
		values[p.Name] = v
	}
	for name := range params {
		if _, ok := values[name]; !ok {
			return nil, fmt.Errorf("processTemplate(%s): parameter %s given but not declared", file, name)
		}
	}
	var firstErr error
	replace := func(re *regexp.Regexp, s string, value func(name string) string) string {
		return re.ReplaceAllStringFunc(s, func(ref string) string {
			name := re.FindStringSubmatch(ref)[1]
			if _, ok := values[name]; !ok && firstErr == nil {
				firstErr = fmt.Errorf("processTemplate(%s): %s: parameter not declared", file, ref)
			}
			return value(name)
		})
	}
	wholeRef := regexp.MustCompile(`"\$\{\{([A-Z][A-Z0-9_]*)\}\}"`)
	stringRef := regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)\}`)
	var objs []*unstructured.Unstructured
	for i, raw := range tpl.Objects {
		s := replace(wholeRef, string(raw), func(name string) string { return values[name] })
		s = replace(stringRef, s, func(name string) string {
			q, _ := json.Marshal(values[name])
			return string(q[1 : len(q)-1])
		})
		if firstErr != nil {
			return nil, firstErr
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(s)); err != nil {
			return nil, fmt.Errorf("processTemplate(%s): objects[%d]: %w", file, i, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

func randomAlnum(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b strings.Builder
	for range n {
		i, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b.WriteByte(alphabet[i.Int64()])
	}
	return b.String()
}

// process is processTemplate for tests.
func process(t *testing.T, file string, params map[string]string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := processTemplate(file, params)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// only returns the one object of kind among objs.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("objects of kind %s = %d, want 1 (kinds: %v)", kind, len(found), kinds(objs))
	}
	return found[0]
}

func kinds(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind())
	}
	slices.Sort(ks)
	return ks
}

// field reads a string, an int64 or a map at path of obj, failing the test when it is absent.
func field[T any](t *testing.T, obj *unstructured.Unstructured, path ...string) T {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no field %s (err %v)", obj.GetKind(), obj.GetName(), strings.Join(path, "."), err)
	}
	tv, ok := v.(T)
	if !ok {
		t.Fatalf("%s %s: %s = %v (%T), want a %T", obj.GetKind(), obj.GetName(), strings.Join(path, "."), v, v, *new(T))
	}
	return tv
}

func TestProcessTemplateRefusesWhatOcProcessRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file   string
		params map[string]string
		want   string
	}{
		{cnpgFile, nil, "BACKUP_DESTINATION_PATH is required"},
		{cnpgRecoveryFile, map[string]string{"BACKUP_DESTINATION_PATH": "s3://b/p"}, "RECOVERY_TARGET_TIME is required"},
		{cnpgFile, map[string]string{"BACKUP_DESTINATION_PATH": "s3://b/p", "NO_SUCH": "x"}, "NO_SUCH given but not declared"},
	} {
		_, err := processTemplate(c.file, c.params)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("processTemplate(%s, %v) = %v, want an error with %q", c.file, c.params, err, c.want)
		}
	}
	objs := process(t, cnpgFile, map[string]string{"BACKUP_DESTINATION_PATH": `s3://b/"quoted"`, "INSTANCES": "5"})
	cluster := only(t, objs, "Cluster")
	if got := field[int64](t, cluster, "spec", "instances"); got != 5 {
		t.Errorf("${{INSTANCES}} = 5 gave instances %d", got)
	}
	if got := field[string](t, cluster, "spec", "backup", "barmanObjectStore", "destinationPath"); got != `s3://b/"quoted"` {
		t.Errorf("${BACKUP_DESTINATION_PATH} gave %q", got)
	}
	a := field[string](t, only(t, objs, "Secret"), "stringData", "password")
	b := field[string](t, only(t, process(t, cnpgFile, map[string]string{"BACKUP_DESTINATION_PATH": "s3://b/p"}), "Secret"), "stringData", "password")
	if len(a) != 32 || a == b {
		t.Errorf("generated passwords %q and %q, want two different ones of 32 characters", a, b)
	}
}
