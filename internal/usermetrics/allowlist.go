package usermetrics

import (
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"
)

//go:embed allowlist.yaml
var defaultAllowList []byte

var (
	metricNamePattern = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNamePattern  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// The fleet manager's own series an allow-list may name (inventory.go).
var inventorySeries = []string{
	seriesClusterInfo, seriesClusterAvailable, seriesClusterPhase, seriesClusterCapacity, seriesClusterAllocatable,
	seriesClusterPolicyCompliant, seriesRegistrations, seriesPoolClusters, seriesPoolCapacityUnits, seriesPoolReservedUnits,
}

// Grant is one allow-list: metric names, labels and inventory series.
type Grant struct {
	Metrics   []string `json:"metrics"`
	Labels    []string `json:"labels"`
	Inventory []string `json:"inventory"`
}

// AllowListFile is the allow-list file's shape.
type AllowListFile struct {
	Grant
	// Organizations adds to the grant for each organisation id.
	Organizations map[string]Grant `json:"organizations"`
}

// AllowList answers what an organisation may read.
type AllowList struct {
	file AllowListFile
}

// Allowed is what one caller may read: sets of metric names, labels and
// inventory series.
type Allowed struct {
	Metrics   map[string]bool
	Labels    map[string]bool
	Inventory map[string]bool
}

// LoadAllowList reads the allow-list file, or the embedded default when path
// is empty; unknown fields, bad names and unknown inventory series are errors
// that name the file.
func LoadAllowList(path string) (*AllowList, error) {
	raw, name := defaultAllowList, "the embedded allow-list"
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--user-metrics-allow-list-file: %w", err)
		}
		raw, name = b, path
	}
	var f AllowListFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("--user-metrics-allow-list-file %s: %w", name, err)
	}
	if err := f.Grant.check("", name); err != nil {
		return nil, err
	}
	for org, g := range f.Organizations {
		if err := g.check(org, name); err != nil {
			return nil, err
		}
	}
	return &AllowList{file: f}, nil
}

func (g Grant) check(org, file string) error {
	where := file
	if org != "" {
		where = fmt.Sprintf("%s, organizations[%q]", file, org)
	}
	for _, m := range g.Metrics {
		if !metricNamePattern.MatchString(m) {
			return fmt.Errorf("--user-metrics-allow-list-file %s: metrics: %q is not a metric name", where, m)
		}
	}
	for _, l := range g.Labels {
		if !labelNamePattern.MatchString(l) || l == "__name__" {
			return fmt.Errorf("--user-metrics-allow-list-file %s: labels: %q is not a label name", where, l)
		}
	}
	for _, s := range g.Inventory {
		if !slices.Contains(inventorySeries, s) {
			return fmt.Errorf("--user-metrics-allow-list-file %s: inventory: %q is not one of %v", where, s, inventorySeries)
		}
	}
	return nil
}

// For returns what org may read; an admin reads the union of every grant.
func (a *AllowList) For(org string, admin bool) Allowed {
	out := Allowed{Metrics: map[string]bool{}, Labels: map[string]bool{}, Inventory: map[string]bool{}}
	add := func(g Grant) {
		for _, m := range g.Metrics {
			out.Metrics[m] = true
		}
		for _, l := range g.Labels {
			out.Labels[l] = true
		}
		for _, s := range g.Inventory {
			out.Inventory[s] = true
		}
	}
	add(a.file.Grant)
	for o, g := range a.file.Organizations {
		if admin || o == org {
			add(g)
		}
	}
	return out
}
