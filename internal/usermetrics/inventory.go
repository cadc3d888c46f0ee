package usermetrics

import (
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// The fleet manager's own series, named <service>_<series>.
const (
	seriesClusterInfo            = "cluster_info"
	seriesClusterAvailable       = "cluster_available"
	seriesClusterPhase           = "cluster_phase"
	seriesClusterCapacity        = "cluster_capacity"
	seriesClusterAllocatable     = "cluster_allocatable"
	seriesClusterPolicyCompliant = "cluster_policy_compliant"
	seriesRegistrations          = "registrations"
	seriesPoolClusters           = "pool_clusters"
	seriesPoolCapacityUnits      = "pool_capacity_units"
	seriesPoolReservedUnits      = "pool_reserved_units"
)

var inventoryHelp = map[string]string{
	seriesClusterInfo:            "The cluster as the inventory knows it; always 1.",
	seriesClusterAvailable:       "1 when the hub reports the cluster available, 0 when it reports it unavailable.",
	seriesClusterPhase:           "1 for the phase of the cluster's registration.",
	seriesClusterCapacity:        "The cluster's capacity of each resource, as its hub reports it.",
	seriesClusterAllocatable:     "The cluster's allocatable amount of each resource, as its hub reports it.",
	seriesClusterPolicyCompliant: "1 when the cluster complies with the policy, 0 when it does not (absent while pending).",
	seriesRegistrations:          "The organisation's cluster registrations in each phase.",
	seriesPoolClusters:           "The capacity pool's clusters.",
	seriesPoolCapacityUnits:      "The capacity pool's units of capacity.",
	seriesPoolReservedUnits:      "The capacity pool's units reserved by service instances.",
}

// families collects metric families by name.
type families struct {
	byName map[string]*dto.MetricFamily
	seen   map[string]map[string]bool
}

func newFamilies() *families {
	return &families{byName: map[string]*dto.MetricFamily{}, seen: map[string]map[string]bool{}}
}

// add adds one sample; a second sample of the same name and labels is
// dropped (the text format allows one per series).
func (f *families) add(name, help string, typ dto.MetricType, lbls []*dto.LabelPair, value float64) {
	mf, ok := f.byName[name]
	if !ok {
		mf = &dto.MetricFamily{Name: proto.String(name), Type: typ.Enum()}
		if help != "" {
			mf.Help = proto.String(help)
		}
		f.byName[name] = mf
		f.seen[name] = map[string]bool{}
	}
	slices.SortFunc(lbls, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	var key strings.Builder
	for _, l := range lbls {
		key.WriteString(l.GetName())
		key.WriteByte(0)
		key.WriteString(l.GetValue())
		key.WriteByte(0)
	}
	if f.seen[name][key.String()] {
		return
	}
	f.seen[name][key.String()] = true
	m := &dto.Metric{Label: lbls}
	switch typ {
	case dto.MetricType_GAUGE:
		m.Gauge = &dto.Gauge{Value: proto.Float64(value)}
	default:
		m.Untyped = &dto.Untyped{Value: proto.Float64(value)}
	}
	mf.Metric = append(mf.Metric, m)
}

// sorted returns the families in name order.
func (f *families) sorted() []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, 0, len(f.byName))
	for _, name := range slices.Sorted(maps.Keys(f.byName)) {
		out = append(out, f.byName[name])
	}
	return out
}

func pair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)}
}

// inventoryRenderer turns what the fleet manager knows into its own series.
type inventoryRenderer struct {
	prefix       string
	clusterLabel string
	source       string
}

// clusterValue is the cluster label's value for c.
func (r inventoryRenderer) clusterValue(c fleet.MetricsCluster) string {
	if r.source == SourceName {
		return c.Name
	}
	return c.ClusterID
}

// clusterLabels identify a cluster in the own series: the cluster label
// (when the cluster has a value for it) and its name.
func (r inventoryRenderer) clusterLabels(c fleet.MetricsCluster, extra ...*dto.LabelPair) []*dto.LabelPair {
	lbls := []*dto.LabelPair{pair("name", c.Name), pair("org_id", c.OrgID)}
	if v := r.clusterValue(c); v != "" && r.clusterLabel != "name" && r.clusterLabel != "org_id" {
		lbls = append(lbls, pair(r.clusterLabel, v))
	}
	return append(lbls, extra...)
}

// render adds the allowed own series of inv to f.
func (r inventoryRenderer) render(f *families, inv fleet.MetricsInventory, allowed map[string]bool) {
	gauge := func(series string, lbls []*dto.LabelPair, v float64) {
		if allowed[series] {
			f.add(r.prefix+series, inventoryHelp[series], dto.MetricType_GAUGE, lbls, v)
		}
	}
	byID := map[string]fleet.MetricsCluster{}
	for _, c := range inv.Clusters {
		byID[c.ManagedClusterID] = c
		info := []*dto.LabelPair{pair("openshift_version", c.OpenShiftVersion), pair("kubernetes_version", c.KubernetesVersion),
			pair("platform", c.Platform), pair("region", c.Region), pair("registration_id", c.RegistrationID)}
		gauge(seriesClusterInfo, r.clusterLabels(c, info...), 1)
		switch c.Available {
		case fleet.ConditionTrue:
			gauge(seriesClusterAvailable, r.clusterLabels(c), 1)
		case fleet.ConditionFalse:
			gauge(seriesClusterAvailable, r.clusterLabels(c), 0)
		}
		if c.Phase != "" {
			gauge(seriesClusterPhase, r.clusterLabels(c, pair("phase", string(c.Phase))), 1)
		}
		for _, q := range []struct {
			series string
			doc    fleet.StringMapJSON
		}{{seriesClusterCapacity, c.Capacity}, {seriesClusterAllocatable, c.Allocatable}} {
			if !allowed[q.series] {
				continue
			}
			amounts, err := q.doc.Map()
			if err != nil {
				continue
			}
			for _, res := range slices.Sorted(maps.Keys(amounts)) {
				qty, err := resource.ParseQuantity(amounts[res])
				if err != nil {
					continue
				}
				gauge(q.series, r.clusterLabels(c, pair("resource", res)), qty.AsApproximateFloat64())
			}
		}
	}
	for _, s := range inv.Compliance {
		c, ok := byID[s.ManagedClusterID]
		if !ok {
			continue
		}
		switch s.State {
		case "Compliant":
			gauge(seriesClusterPolicyCompliant, r.clusterLabels(c, pair("policy", s.PolicyName), pair("policy_id", s.PolicyID)), 1)
		case "NonCompliant":
			gauge(seriesClusterPolicyCompliant, r.clusterLabels(c, pair("policy", s.PolicyName), pair("policy_id", s.PolicyID)), 0)
		}
	}
	for _, p := range inv.Phases {
		gauge(seriesRegistrations, []*dto.LabelPair{pair("org_id", p.OrgID), pair("phase", string(p.Phase))}, float64(p.Count))
	}
	for _, p := range inv.Pools {
		lbls := func() []*dto.LabelPair {
			return []*dto.LabelPair{pair("org_id", p.OrgID), pair("pool", p.PoolName), pair("pool_id", p.PoolID)}
		}
		gauge(seriesPoolClusters, lbls(), float64(p.Clusters))
		gauge(seriesPoolCapacityUnits, lbls(), float64(p.CapacityUnits))
		gauge(seriesPoolReservedUnits, lbls(), float64(p.ReservedUnits))
	}
}
