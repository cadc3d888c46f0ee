package templates_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/internal/promtest"
)

// rulesTestFile holds the promtool unit tests of the PrometheusRule's
// alerts: input series and the alerts expected at given times. It names
// its rule file rules.yml, which the test writes beside it.
const rulesTestFile = "testdata/rules-test.yml"

// writeRules writes the PrometheusRule's groups, from the template
// processed with its defaults, as a Prometheus rule file in dir.
func writeRules(t *testing.T, dir string) prometheusRule {
	t.Helper()
	_, pr := monitoringObjects(t, nil)
	b, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatalf("yaml.Marshal(groups): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return pr
}

// promtool runs promtool with args in dir and returns its output; it fails
// the test when promtool is missing, never skips.
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	bin, err := promtest.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAlertRulesPassPromtool: `promtool check rules` accepts the rule file
// (expressions, durations, templates of the annotations) and `promtool test
// rules` runs testdata/rules-test.yml against it.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRules(t, dir)
	if out, err := promtool(t, dir, "check", "rules", "rules.yml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules-test.yml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, dir, "test", "rules", "rules-test.yml")
	if err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
}

// TestPromtoolTestRulesHasTeeth: the same tests fail against a rule file
// whose thresholds moved, so a passing run means the expectations were
// checked.
func TestPromtoolTestRulesHasTeeth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRules(t, dir)
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(rules), "reconcile_queue_depth) > 100", "reconcile_queue_depth) > 1000", 1)
	if broken == string(rules) {
		t.Fatal("rules.yml has no queue depth threshold of 100 to move")
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules-test.yml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, dir, "test", "rules", "rules-test.yml")
	if err == nil || !strings.Contains(out, "FleetManagerQueueNotDraining") {
		t.Errorf("promtool test rules with the threshold at 1000 = %v, want a failure naming FleetManagerQueueNotDraining:\n%s", err, out)
	}
}

// TestEveryAlertIsTestedFiringAndSilent reads testdata/rules-test.yml: each
// alert of the PrometheusRule has a case where it fires and one where it
// stays silent, and the file names no alert the rule lacks (promtool would
// pass such a case, expecting nothing of an alert that does not exist).
func TestEveryAlertIsTestedFiringAndSilent(t *testing.T) {
	t.Parallel()
	_, pr := monitoringObjects(t, nil)
	checkEveryAlertTested(t, rulesTestFile, "rules.yml", pr)
}

// checkEveryAlertTested checks that the promtool tests of file, reading
// ruleFile, have a case where each alert of pr fires and one where it stays
// silent, and name no alert pr lacks.
func checkEveryAlertTested(t *testing.T, file, ruleFile string, pr prometheusRule) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTests []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatalf("yaml.Unmarshal(%s): %v", file, err)
	}
	if !slices.Equal(tests.RuleFiles, []string{ruleFile}) {
		t.Errorf("%s rule_files = %v, want [%s]", file, tests.RuleFiles, ruleFile)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				silent[a.Alertname]++
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if fires[r.Alert] == 0 {
				t.Errorf("%s: no case where %s fires", file, r.Alert)
			}
			if silent[r.Alert] == 0 {
				t.Errorf("%s: no case where %s stays silent", file, r.Alert)
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which the PrometheusRule lacks", file, name)
		}
	}
	for name := range silent {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which the PrometheusRule lacks", file, name)
		}
	}
}
