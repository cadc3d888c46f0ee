package fleet

import (
	"encoding/json"
	"maps"
	"strings"
)

// PoolConfig is what a deployment makes its pools' clusters with; a fork
// changes it through flags (docs/forking.md).
type PoolConfig struct {
	// InstanceTypes maps each size class to each cloud's amd64 instance
	// type, ARM64InstanceTypes to its arm64 one.
	InstanceTypes      map[Cloud]map[SizeClass]string
	ARM64InstanceTypes map[Cloud]map[SizeClass]string
	// BaseDomain is the DNS domain the clusters are made under.
	BaseDomain string
	// ReleaseImageRepository is where release images are pulled from; a
	// release's image is <repository>:<release>-<arch>, where arch is
	// ReleaseArchitecture's name of the blueprint's architecture.
	ReleaseImageRepository string
	// ControlPlaneReplicas is the control plane's node count.
	ControlPlaneReplicas int
	// AzureBaseDomainResourceGroup is the Azure resource group of the base
	// domain's DNS zone, which the installer needs on Azure; without it the
	// deployment makes no pools on Azure.
	AzureBaseDomainResourceGroup string
	// GCPProjectID is the GCP project the clusters are made in, which the
	// installer makes every GCP call in; without it the deployment makes no
	// pools on GCP.
	GCPProjectID string
	Scaler       ScalerConfig
	// Limits are every organisation's capacity-pool limits but those an
	// administrator overrides.
	Limits OrgLimits
}

// DefaultPoolConfig returns the settings a fork starts from.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{
		InstanceTypes: map[Cloud]map[SizeClass]string{
			CloudAWS:   {SizeSmall: "m6i.xlarge", SizeMedium: "m6i.2xlarge", SizeLarge: "m6i.4xlarge", SizeXLarge: "m6i.8xlarge"},
			CloudGCP:   {SizeSmall: "n2-standard-4", SizeMedium: "n2-standard-8", SizeLarge: "n2-standard-16", SizeXLarge: "n2-standard-32"},
			CloudAzure: {SizeSmall: "Standard_D4s_v5", SizeMedium: "Standard_D8s_v5", SizeLarge: "Standard_D16s_v5", SizeXLarge: "Standard_D32s_v5"},
		},
		ARM64InstanceTypes: map[Cloud]map[SizeClass]string{
			CloudAWS:   {SizeSmall: "m6g.xlarge", SizeMedium: "m6g.2xlarge", SizeLarge: "m6g.4xlarge", SizeXLarge: "m6g.8xlarge"},
			CloudGCP:   {SizeSmall: "t2a-standard-4", SizeMedium: "t2a-standard-8", SizeLarge: "t2a-standard-16", SizeXLarge: "t2a-standard-32"},
			CloudAzure: {SizeSmall: "Standard_D4ps_v5", SizeMedium: "Standard_D8ps_v5", SizeLarge: "Standard_D16ps_v5", SizeXLarge: "Standard_D32ps_v5"},
		},
		BaseDomain:             "clusters.example.com",
		ReleaseImageRepository: "quay.io/openshift-release-dev/ocp-release",
		ControlPlaneReplicas:   3,
		Scaler:                 DefaultScalerConfig(),
		Limits:                 OrgLimits{Pools: 20, PoolClusters: 100},
	}
}

// InstanceTypesFor returns the size-class mapping of an architecture.
func (c PoolConfig) InstanceTypesFor(a Architecture) map[Cloud]map[SizeClass]string {
	if a.Or() == ArchARM64 {
		return c.ARM64InstanceTypes
	}
	return c.InstanceTypes
}

// CloudReady fails with CodeValidation when the deployment lacks what the
// installer needs to make clusters on cloud.
func (c PoolConfig) CloudReady(cloud Cloud) error {
	if (cloud == CloudGCP && c.GCPProjectID == "") || (cloud == CloudAzure && c.AzureBaseDomainResourceGroup == "") {
		return Errorf(CodeValidation, "this deployment makes no capacity pools on %s", cloud)
	}
	return nil
}

// ReleaseArchitecture returns the suffix of a release image's tag for an
// architecture, as quay.io/openshift-release-dev/ocp-release names them
// (4.16.3-x86_64, 4.16.3-aarch64).
func ReleaseArchitecture(a Architecture) string {
	if a.Or() == ArchARM64 {
		return "aarch64"
	}
	return "x86_64"
}

// InstallClusterName returns the name a pool cluster is installed under
// (its ClusterDeployment's clusterName and its install-config's
// metadata.name): ManagedClusterName's, shortened to the installer's limit
// (a DNS label less the nine characters of "\052.apps") and starting with a
// letter, which GCP and Azure resource names need.
func InstallClusterName(reg Registration) string {
	name := ManagedClusterName(reg)
	if name[0] < 'a' || name[0] > 'z' {
		name = "c" + name
	}
	const limit = 63 - 9
	if len(name) <= limit {
		return name
	}
	base, suffix := name[:strings.LastIndex(name, "-")], name[strings.LastIndex(name, "-"):]
	return strings.TrimRight(base[:limit-len(suffix)], "-") + suffix
}

// PoolClusterDelivery is what a pool cluster's Hive objects are made of.
type PoolClusterDelivery struct {
	PoolID           string
	Cloud            Cloud
	Region           string
	BlueprintVersion int
	Spec             BlueprintSpec
	Replicas         map[string]int
	// AddOns is true once the cluster joined: its ManifestWorks go too.
	AddOns      bool
	Credentials *PoolCredentials
}

// LabelPoolID marks a pool cluster's hub objects with its pool.
const LabelPoolID = "fleet-manager.io/pool-id"

// PoolClusterObjects renders a pool cluster's hub objects, in apply order:
// the registration's (namespace, ManagedCluster, KlusterletAddonConfig, which
// RHACM imports a Hive cluster with), its ClusterImageSet, the install-config,
// cloud-credential and pull secrets, the ClusterDeployment, a MachinePool per
// blueprint machine pool and, once joined, a ManifestWork per add-on.
func PoolClusterObjects(reg Registration, hubID string, d PoolClusterDelivery, cfg PoolConfig) []map[string]any {
	objects := DesiredObjects(reg, hubID, nil)
	name := ManagedClusterName(reg)
	own := map[string]any{LabelRegistrationID: reg.ID, LabelOrgID: reg.OrgID, LabelManagedBy: ManagedByAgent,
		LabelHubID: hubID, LabelPoolID: d.PoolID}
	meta := func(n string) map[string]any {
		return map[string]any{"name": n, "namespace": name, "labels": maps.Clone(own)}
	}
	instance := func(pool string, size SizeClass) string {
		if o, ok := d.Spec.Overrides[d.Cloud]; ok {
			if t := o.MachinePoolInstanceTypes[pool]; t != "" {
				return t
			}
		}
		return cfg.InstanceTypesFor(d.Spec.Architecture)[d.Cloud][size]
	}
	controlPlane := cfg.InstanceTypesFor(d.Spec.Architecture)[d.Cloud][d.Spec.ControlPlane]
	if o, ok := d.Spec.Overrides[d.Cloud]; ok && o.ControlPlaneInstanceType != "" {
		controlPlane = o.ControlPlaneInstanceType
	}
	imageSet := name
	objects = append(objects,
		map[string]any{
			"apiVersion": "hive.openshift.io/v1", "kind": "ClusterImageSet",
			"metadata": map[string]any{"name": imageSet, "labels": maps.Clone(own)},
			"spec":     map[string]any{"releaseImage": cfg.ReleaseImageRepository + ":" + d.Spec.Release + "-" + ReleaseArchitecture(d.Spec.Architecture)},
		},
		map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta(name + "-install-config"),
			"stringData": map[string]any{"install-config.yaml": installConfig(InstallClusterName(reg), d, cfg, controlPlane, instance)},
		})
	if d.Credentials != nil {
		cloud := map[string]any{}
		for k, v := range d.Credentials.Cloud {
			cloud[k] = v
		}
		objects = append(objects,
			map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta(name + "-cloud-credentials"),
				"stringData": cloud},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson", "metadata": meta(name + "-pull-secret"),
				"stringData": map[string]any{".dockerconfigjson": d.Credentials.PullSecret}})
	}
	platform := map[string]any{"region": d.Region, "credentialsSecretRef": map[string]any{"name": name + "-cloud-credentials"}}
	if d.Cloud == CloudAzure && cfg.AzureBaseDomainResourceGroup != "" {
		platform["baseDomainResourceGroupName"] = cfg.AzureBaseDomainResourceGroup
	}
	objects = append(objects, map[string]any{
		"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment", "metadata": meta(name),
		"spec": map[string]any{
			"baseDomain": cfg.BaseDomain, "clusterName": InstallClusterName(reg),
			"platform": map[string]any{string(d.Cloud): platform},
			"provisioning": map[string]any{
				"imageSetRef":            map[string]any{"name": imageSet},
				"installConfigSecretRef": map[string]any{"name": name + "-install-config"},
			},
			"pullSecretRef": map[string]any{"name": name + "-pull-secret"},
		},
	})
	for _, mp := range d.Spec.MachinePools {
		spec := map[string]any{
			"clusterDeploymentRef": map[string]any{"name": name}, "name": mp.Name,
			"platform": machinePoolPlatform(d.Cloud, instance(mp.Name, mp.Size)),
			"replicas": int64(d.Replicas[mp.Name]),
		}
		if len(mp.Labels) > 0 {
			labels := map[string]any{}
			for k, v := range mp.Labels {
				labels[k] = v
			}
			spec["labels"] = labels
		}
		if len(mp.Taints) > 0 {
			taints := make([]any, len(mp.Taints))
			for i, t := range mp.Taints {
				taints[i] = map[string]any{"key": t.Key, "value": t.Value, "effect": t.Effect}
			}
			spec["taints"] = taints
		}
		objects = append(objects, map[string]any{
			"apiVersion": "hive.openshift.io/v1", "kind": "MachinePool", "metadata": meta(name + "-" + mp.Name), "spec": spec,
		})
	}
	if d.AddOns {
		for _, a := range d.Spec.AddOns {
			manifests := make([]any, len(a.Manifests))
			for i, m := range a.Manifests {
				manifests[i] = m
			}
			objects = append(objects, map[string]any{
				"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork", "metadata": meta("addon-" + a.Name),
				"spec": map[string]any{"workload": map[string]any{"manifests": manifests}},
			})
		}
	}
	return objects
}

// machinePoolPlatform is a Hive MachinePool's platform for one instance
// type, with the fields each cloud's schema requires.
func machinePoolPlatform(cloud Cloud, instanceType string) map[string]any {
	switch cloud {
	case CloudAWS:
		return map[string]any{"aws": map[string]any{"type": instanceType, "rootVolume": map[string]any{"size": int64(120), "type": "gp3"}}}
	case CloudAzure:
		return map[string]any{"azure": map[string]any{"type": instanceType, "osDisk": map[string]any{"diskSizeGB": int64(128)}}}
	default:
		return map[string]any{"gcp": map[string]any{"type": instanceType}}
	}
}

// installConfig renders the install-config Hive installs the cluster with,
// as JSON (which YAML parsers read): the control plane and the first machine
// pool as the install's compute; Hive's MachinePools own the workers after.
func installConfig(name string, d PoolClusterDelivery, cfg PoolConfig, controlPlane string, instance func(string, SizeClass) string) string {
	first := d.Spec.MachinePools[0]
	platform := func(t string) map[string]any {
		return map[string]any{string(d.Cloud): map[string]any{"type": t}}
	}
	// The installer defaults a machine pool's architecture to amd64, and
	// the release image must be built for the one it makes.
	arch := string(d.Spec.Architecture.Or())
	cloud := map[string]any{"region": d.Region}
	switch d.Cloud {
	case CloudGCP:
		cloud["projectID"] = cfg.GCPProjectID
	case CloudAzure:
		cloud["baseDomainResourceGroupName"] = cfg.AzureBaseDomainResourceGroup
	}
	ic := map[string]any{
		"apiVersion": "v1", "baseDomain": cfg.BaseDomain,
		"metadata": map[string]any{"name": name},
		"controlPlane": map[string]any{"name": "master", "replicas": cfg.ControlPlaneReplicas, "architecture": arch,
			"platform": platform(controlPlane)},
		"compute": []any{map[string]any{"name": "worker", "replicas": d.Replicas[first.Name], "architecture": arch,
			"platform": platform(instance(first.Name, first.Size))}},
		"networking": map[string]any{
			"networkType": "OVNKubernetes", "machineNetwork": []any{map[string]any{"cidr": "10.0.0.0/16"}},
			"clusterNetwork": []any{map[string]any{"cidr": "10.128.0.0/14", "hostPrefix": 23}}, "serviceNetwork": []any{"172.30.0.0/16"},
		},
		"platform": map[string]any{string(d.Cloud): cloud},
	}
	b, _ := json.Marshal(ic) // maps of strings, numbers and slices always marshal
	return string(b)
}
