package postgres

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// addPoolFlags binds what capacity pools' clusters are made with.
func (c *StoreConfig) addPoolFlags(fs *pflag.FlagSet) {
	p := &c.Pools
	fs.Var(instanceTypesValue{&p.InstanceTypes}, "pool-instance-types",
		"cloud.size=instance-type pairs that replace the defaults of the size-class mapping of amd64 blueprints, e.g. aws.large=m6i.4xlarge,gcp.small=n2-standard-4")
	fs.Var(instanceTypesValue{&p.ARM64InstanceTypes}, "pool-arm64-instance-types",
		"cloud.size=instance-type pairs that replace the defaults of the size-class mapping of arm64 blueprints, e.g. aws.large=m7g.4xlarge")
	fs.StringVar(&p.BaseDomain, "pool-base-domain", p.BaseDomain, "DNS domain capacity pools' clusters are made under (their ClusterDeployments' baseDomain)")
	fs.StringVar(&p.ReleaseImageRepository, "pool-release-image-repository", p.ReleaseImageRepository,
		"repository of the OpenShift release images; a blueprint's release R is installed from <repository>:R-x86_64, or R-aarch64 for arm64 blueprints")
	fs.IntVar(&p.ControlPlaneReplicas, "pool-control-plane-replicas", p.ControlPlaneReplicas, "control-plane nodes of every pool cluster")
	fs.StringVar(&p.AzureBaseDomainResourceGroup, "pool-azure-base-domain-resource-group", p.AzureBaseDomainResourceGroup,
		"Azure resource group of --pool-base-domain's DNS zone (the install-config's baseDomainResourceGroupName); without it no pool may be made on Azure")
	fs.StringVar(&p.GCPProjectID, "pool-gcp-project-id", p.GCPProjectID,
		"GCP project pool clusters are made in (the install-config's projectID); without it no pool may be made on GCP")
	fs.IntVar(&p.Scaler.ScaleUpPercent, "pool-scale-up-percent", p.Scaler.ScaleUpPercent,
		"default share of what a cluster's nodes hold that, reserved, adds a step of nodes (pools may set their own)")
	fs.IntVar(&p.Scaler.AddClusterPercent, "pool-add-cluster-percent", p.Scaler.AddClusterPercent,
		"default share of every cluster's capacity that, reserved, adds a cluster to the pool (pools may set their own)")
	fs.IntVar(&p.Scaler.Step, "pool-scale-step", p.Scaler.Step, "nodes a scaled machine pool gains or loses at once")
	fs.DurationVar(&p.Scaler.Cooldown, "pool-scale-cooldown", p.Scaler.Cooldown, "how long a cluster's nodes stay after a change before they may go down")
	fs.IntVar(&p.Scaler.ScaleDownMarginPercent, "pool-scale-down-margin", p.Scaler.ScaleDownMarginPercent,
		"hysteresis in percentage points: nodes or an idle cluster go only when what stays is this far below the threshold")
	fs.DurationVar(&p.Scaler.IdleTime, "pool-idle-time", p.Scaler.IdleTime, "how long an empty cluster above its pool's minimum stays before it is removed")
	fs.IntVar(&p.Limits.Pools, "pool-quota", p.Limits.Pools,
		"most live capacity pools an organisation may have, unless an administrator overrides it (max_pools; 0: no limit)")
	fs.IntVar(&p.Limits.PoolClusters, "pool-cluster-quota", p.Limits.PoolClusters,
		"most live pool clusters an organisation's pools may have together, unless overridden (max_pool_clusters; 0: no limit); they count against --registration-quota too")
	fs.IntVar(&p.Limits.ReservedUnits, "reserved-units-quota", p.Limits.ReservedUnits,
		"most units an organisation's reservations may book together, unless overridden (max_reserved_units; 0: no limit)")
}

// validatePools checks the pool settings, naming their flags.
func (c StoreConfig) validatePools(p *config.Problems) {
	pc := c.Pools
	for flag, types := range map[string]map[fleet.Cloud]map[fleet.SizeClass]string{
		"pool-instance-types": pc.InstanceTypes, "pool-arm64-instance-types": pc.ARM64InstanceTypes} {
		for _, cloud := range fleet.Clouds() {
			for _, size := range fleet.SizeClasses() {
				if types[cloud][size] == "" {
					p.Addf(flag, "%s.%s has no instance type", cloud, size)
				}
			}
		}
	}
	if pc.GCPProjectID != "" && !gcpProjectID.MatchString(pc.GCPProjectID) {
		p.Addf("pool-gcp-project-id", "must be a GCP project ID: 6 to 30 lower-case letters, digits and hyphens, from a letter, not ending in a hyphen")
	}
	if g := pc.AzureBaseDomainResourceGroup; g != "" && (!azureResourceGroup.MatchString(g) || strings.HasSuffix(g, ".")) {
		p.Addf("pool-azure-base-domain-resource-group", "must be an Azure resource group name: 1 to 90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'")
	}
	if !baseDomain.MatchString(pc.BaseDomain) {
		p.Addf("pool-base-domain", "%q must be a DNS domain", pc.BaseDomain)
	}
	repo := pc.ReleaseImageRepository
	if repo == "" || strings.ContainsAny(repo, " @") || strings.Contains(repo[strings.LastIndex(repo, "/")+1:], ":") {
		p.Addf("pool-release-image-repository", "%q must be an image repository without a tag or digest", repo)
	}
	if pc.ControlPlaneReplicas != 1 && pc.ControlPlaneReplicas != 3 && pc.ControlPlaneReplicas != 5 {
		p.Addf("pool-control-plane-replicas", "must be 1, 3 or 5 (got %d)", pc.ControlPlaneReplicas)
	}
	s := pc.Scaler
	for flag, v := range map[string]int{"pool-scale-up-percent": s.ScaleUpPercent, "pool-add-cluster-percent": s.AddClusterPercent} {
		if v < 10 || v > 100 {
			p.Addf(flag, "must be 10 to 100 (got %d)", v)
		}
	}
	if s.Step < 1 || s.Step > 100 {
		p.Addf("pool-scale-step", "must be 1 to 100 (got %d)", s.Step)
	}
	if s.ScaleDownMarginPercent < 0 || s.ScaleDownMarginPercent >= min(s.ScaleUpPercent, s.AddClusterPercent) {
		p.Addf("pool-scale-down-margin", "must be from 0 to below both thresholds (got %d)", s.ScaleDownMarginPercent)
	}
	for flag, v := range map[string]int{"pool-quota": pc.Limits.Pools, "pool-cluster-quota": pc.Limits.PoolClusters,
		"reserved-units-quota": pc.Limits.ReservedUnits} {
		if v < 0 || v > fleet.MaxOrgLimit {
			p.Addf(flag, "must be from 0 (no limit) to %d (got %d)", fleet.MaxOrgLimit, v)
		}
	}
	for flag, d := range map[string]time.Duration{"pool-scale-cooldown": s.Cooldown, "pool-idle-time": s.IdleTime} {
		if d < 0 {
			p.Addf(flag, "must not be negative (got %s)", d)
		}
	}
}

// GCP's and Azure's rules for the names (the Resource Manager's project
// IDs; Azure's resource group names).
var (
	gcpProjectID       = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	azureResourceGroup = regexp.MustCompile(`^[-\w._()]{1,90}$`)
)

var baseDomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)

// instanceTypesValue is --pool-instance-types: each pair replaces one entry
// of the size-class mapping, the others keep their defaults.
type instanceTypesValue struct {
	m *map[fleet.Cloud]map[fleet.SizeClass]string
}

func (v instanceTypesValue) String() string {
	if v.m == nil {
		return ""
	}
	var out []string
	for cloud, sizes := range *v.m {
		for size, t := range sizes {
			out = append(out, fmt.Sprintf("%s.%s=%s", cloud, size, t))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (v instanceTypesValue) Set(s string) error {
	for _, pair := range strings.Split(s, ",") {
		key, t, ok := strings.Cut(strings.TrimSpace(pair), "=")
		cloud, size, ok2 := strings.Cut(key, ".")
		if !ok || !ok2 || t == "" || strings.ContainsAny(t, " /") {
			return fmt.Errorf("%q is not cloud.size=instance-type", pair)
		}
		if !slices.Contains(fleet.Clouds(), fleet.Cloud(cloud)) || !slices.Contains(fleet.SizeClasses(), fleet.SizeClass(size)) {
			return fmt.Errorf("%q: the cloud must be one of %v and the size one of %v", pair, fleet.Clouds(), fleet.SizeClasses())
		}
		if *v.m == nil {
			*v.m = map[fleet.Cloud]map[fleet.SizeClass]string{}
		}
		if (*v.m)[fleet.Cloud(cloud)] == nil {
			(*v.m)[fleet.Cloud(cloud)] = map[fleet.SizeClass]string{}
		}
		(*v.m)[fleet.Cloud(cloud)][fleet.SizeClass(size)] = t
	}
	return nil
}

func (instanceTypesValue) Type() string { return "pairs" }
