package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// SizeClass is a node size a blueprint names; configuration maps it to each
// cloud's instance type (PoolConfig.InstanceTypes), never the user.
type SizeClass string

// The size classes, smallest first.
const (
	SizeSmall  SizeClass = "small"
	SizeMedium SizeClass = "medium"
	SizeLarge  SizeClass = "large"
	SizeXLarge SizeClass = "xlarge"
)

// SizeClasses lists the size classes, smallest first.
func SizeClasses() []SizeClass { return []SizeClass{SizeSmall, SizeMedium, SizeLarge, SizeXLarge} }

// Cloud is a cloud provider Hive provisions on.
type Cloud string

// The clouds a pool may run on.
const (
	CloudAWS   Cloud = "aws"
	CloudGCP   Cloud = "gcp"
	CloudAzure Cloud = "azure"
)

// Clouds lists the clouds, in the API's order.
func Clouds() []Cloud { return []Cloud{CloudAWS, CloudGCP, CloudAzure} }

// Architecture is the CPU architecture of a blueprint's machines, by the
// installer's names.
type Architecture string

// The architectures a blueprint may choose; "" is ArchAMD64.
const (
	ArchAMD64 Architecture = "amd64"
	ArchARM64 Architecture = "arm64"
)

// Architectures lists the architectures, in the API's order.
func Architectures() []Architecture { return []Architecture{ArchAMD64, ArchARM64} }

// Or returns the architecture, ArchAMD64 when unset.
func (a Architecture) Or() Architecture {
	if a == "" {
		return ArchAMD64
	}
	return a
}

// Taint is a machine pool's node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Autoscaling bounds a machine pool the scaler sizes: it starts at Min and
// moves by a step within them as the cluster fills (docs/capacity-pools.md).
type Autoscaling struct {
	Min int `json:"min_replicas"`
	Max int `json:"max_replicas"`
}

// MachinePoolSpec is one of a blueprint's worker pools: fixed Replicas, or
// Autoscaling bounds the scaler moves within.
type MachinePoolSpec struct {
	Name        string            `json:"name"`
	Size        SizeClass         `json:"size"`
	Replicas    *int              `json:"replicas,omitempty"`
	Autoscaling *Autoscaling      `json:"autoscaling,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Taints      []Taint           `json:"taints,omitempty"`
}

// AddOn is a named set of Kubernetes manifests delivered to every cluster of
// a pool once it has joined its hub (as one ManifestWork).
type AddOn struct {
	Name      string           `json:"name"`
	Manifests []map[string]any `json:"manifests"`
}

// CloudOverride replaces, for one cloud, the instance type configuration maps
// a size class to: for the control plane, and per machine pool by name.
type CloudOverride struct {
	ControlPlaneInstanceType string            `json:"control_plane_instance_type,omitempty"`
	MachinePoolInstanceTypes map[string]string `json:"machine_pool_instance_types,omitempty"`
}

// BlueprintSpec is what one version of a blueprint holds: cloud-agnostic,
// with optional per-cloud overrides.
type BlueprintSpec struct {
	// Release is the OpenShift release, as "4.16.3".
	Release string `json:"release"`
	// Architecture is the machines' (control plane and workers); "" is
	// amd64, as before the field existed.
	Architecture Architecture            `json:"architecture,omitempty"`
	ControlPlane SizeClass               `json:"control_plane_size"`
	MachinePools []MachinePoolSpec       `json:"machine_pools"`
	AddOns       []AddOn                 `json:"add_ons,omitempty"`
	Overrides    map[Cloud]CloudOverride `json:"overrides,omitempty"`
}

// Blueprint is an organisation's named cluster definition with immutable,
// numbered versions.
type Blueprint struct {
	ID            string
	OrgID         string
	Owner         string
	Name          string
	LatestVersion int
	// Latest is the spec of LatestVersion.
	Latest    BlueprintSpec
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BlueprintVersion is one immutable version of a blueprint.
type BlueprintVersion struct {
	BlueprintID string
	Version     int
	Spec        BlueprintSpec
	// Pools counts the live pools on this version.
	Pools     int
	CreatedAt time.Time
}

// Limits of a blueprint, so one organisation's definition cannot make a hub
// object or a desired set unbounded.
const (
	maxMachinePools      = 16
	maxAddOns            = 16
	maxManifestsPerAddOn = 64
	maxReplicas          = 500
	maxAddOnBytes        = 256 << 10
)

var (
	releaseVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9.]+)?$`)
	taintEffects   = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
)

// Validate checks a blueprint version's spec; errors carry CodeValidation and
// name the field at fault, never its value.
func (s BlueprintSpec) Validate() error {
	if !releaseVersion.MatchString(s.Release) {
		return Errorf(CodeValidation, "release must be an OpenShift release as 4.16.3")
	}
	if s.Architecture != "" && !slices.Contains(Architectures(), s.Architecture) {
		return Errorf(CodeValidation, "architecture is not one of %v", Architectures())
	}
	if !slices.Contains(SizeClasses(), s.ControlPlane) {
		return Errorf(CodeValidation, "control_plane_size is not one of %v", SizeClasses())
	}
	if len(s.MachinePools) == 0 || len(s.MachinePools) > maxMachinePools {
		return Errorf(CodeValidation, "machine_pools must hold 1 to %d pools", maxMachinePools)
	}
	names := map[string]bool{}
	for i, mp := range s.MachinePools {
		if err := mp.validate(i); err != nil {
			return err
		}
		if names[mp.Name] {
			return Errorf(CodeValidation, "machine_pools[%d]: the name is used twice", i)
		}
		names[mp.Name] = true
	}
	if len(s.AddOns) > maxAddOns {
		return Errorf(CodeValidation, "add_ons: at most %d are allowed", maxAddOns)
	}
	addOns := map[string]bool{}
	for i, a := range s.AddOns {
		if err := a.validate(i); err != nil {
			return err
		}
		if addOns[a.Name] {
			return Errorf(CodeValidation, "add_ons[%d]: the name is used twice", i)
		}
		addOns[a.Name] = true
	}
	for cloud, o := range s.Overrides {
		if !slices.Contains(Clouds(), cloud) {
			return Errorf(CodeValidation, "overrides: the key must be one of %v", Clouds())
		}
		if o.ControlPlaneInstanceType != "" && !instanceType.MatchString(o.ControlPlaneInstanceType) {
			return Errorf(CodeValidation, "overrides.%s.control_plane_instance_type is not an instance type name", cloud)
		}
		for name, t := range o.MachinePoolInstanceTypes {
			if !names[name] {
				return Errorf(CodeValidation, "overrides.%s.machine_pool_instance_types names a machine pool the blueprint does not have", cloud)
			}
			if !instanceType.MatchString(t) {
				return Errorf(CodeValidation, "overrides.%s.machine_pool_instance_types holds a value that is not an instance type name", cloud)
			}
		}
	}
	return nil
}

var instanceType = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (mp MachinePoolSpec) validate(i int) error {
	// The Hive MachinePool is named <cluster>-<pool>: keep pool names short.
	if len(mp.Name) > 20 || !dnsLabel.MatchString(mp.Name) {
		return Errorf(CodeValidation, "machine_pools[%d].name must be a DNS label of at most 20 characters", i)
	}
	if !slices.Contains(SizeClasses(), mp.Size) {
		return Errorf(CodeValidation, "machine_pools[%d].size is not one of %v", i, SizeClasses())
	}
	switch {
	case (mp.Replicas == nil) == (mp.Autoscaling == nil):
		return Errorf(CodeValidation, "machine_pools[%d]: give either replicas or autoscaling", i)
	case mp.Replicas != nil && (*mp.Replicas < 0 || *mp.Replicas > maxReplicas):
		return Errorf(CodeValidation, "machine_pools[%d].replicas must be 0 to %d", i, maxReplicas)
	case mp.Autoscaling != nil && (mp.Autoscaling.Min < 1 || mp.Autoscaling.Max < mp.Autoscaling.Min || mp.Autoscaling.Max > maxReplicas):
		return Errorf(CodeValidation, "machine_pools[%d].autoscaling needs 1 <= min_replicas <= max_replicas <= %d", i, maxReplicas)
	}
	if err := ValidateLabels(mp.Labels); err != nil {
		return Errorf(CodeValidation, "machine_pools[%d].labels: %s", i, ErrorMessageOf(err))
	}
	for j, t := range mp.Taints {
		if ValidateLabelKey(t.Key) != nil || validateLabelValue(t.Key, t.Value) != nil || !slices.Contains(taintEffects, t.Effect) {
			return Errorf(CodeValidation, "machine_pools[%d].taints[%d] needs a label-syntax key and value and an effect of %v", i, j, taintEffects)
		}
	}
	return nil
}

// validate checks an add-on's manifests the way the managed cluster's API
// server checks any object before its schema: apiVersion and kind set, a
// DNS-subdomain name, a DNS-label namespace, no status, and bounded size and
// depth. Their kinds' own schemas live on the managed cluster, which refuses
// what does not match them; the ManifestWork reports that back.
func (a AddOn) validate(i int) error {
	if len(a.Name) > 40 || !dnsLabel.MatchString(a.Name) {
		return Errorf(CodeValidation, "add_ons[%d].name must be a DNS label of at most 40 characters", i)
	}
	if len(a.Manifests) == 0 || len(a.Manifests) > maxManifestsPerAddOn {
		return Errorf(CodeValidation, "add_ons[%d].manifests must hold 1 to %d objects", i, maxManifestsPerAddOn)
	}
	raw, err := json.Marshal(a.Manifests)
	if err != nil || len(raw) > maxAddOnBytes {
		return Errorf(CodeValidation, "add_ons[%d].manifests must encode to at most %d bytes", i, maxAddOnBytes)
	}
	if JSONDepth(raw) > MaxDeliveredDepth-6 { // a ManifestWork nests each manifest 6 levels down
		return Errorf(CodeValidation, "add_ons[%d].manifests are nested too deeply for a hub object", i)
	}
	for j, m := range a.Manifests {
		if err := validateManifest(m); err != nil {
			return Errorf(CodeValidation, "add_ons[%d].manifests[%d]: %s", i, j, err)
		}
	}
	return nil
}

var apiVersionSyntax = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`)
var kindSyntax = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

func validateManifest(m map[string]any) error {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	if !apiVersionSyntax.MatchString(apiVersion) {
		return fmt.Errorf("apiVersion must be <group>/<version> or a core version as v1")
	}
	if !kindSyntax.MatchString(kind) {
		return fmt.Errorf("kind must be an upper-camel-case kind name")
	}
	meta, ok := m["metadata"].(map[string]any)
	if !ok {
		return fmt.Errorf("metadata must be an object")
	}
	name, _ := meta["name"].(string)
	if len(name) > 253 || !dnsSubdomain.MatchString(name) {
		return fmt.Errorf("metadata.name must be a DNS subdomain of at most 253 characters")
	}
	if ns, present := meta["namespace"]; present {
		if s, ok := ns.(string); !ok || !dnsLabel.MatchString(s) {
			return fmt.Errorf("metadata.namespace must be a DNS label")
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		v, present := meta[field]
		if !present {
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("metadata.%s must be an object of strings", field)
		}
		for k, val := range obj {
			s, ok := val.(string)
			if !ok || ValidateLabelKey(k) != nil || field == "labels" && validateLabelValue(k, s) != nil {
				return fmt.Errorf("metadata.%s must map label-syntax keys to strings", field)
			}
		}
	}
	if _, present := m["status"]; present {
		return fmt.Errorf("status is set by the cluster, not by a manifest")
	}
	return nil
}

// ScaledPools returns the blueprint's machine pools the scaler sizes.
func (s BlueprintSpec) ScaledPools() []MachinePoolSpec {
	var out []MachinePoolSpec
	for _, mp := range s.MachinePools {
		if mp.Autoscaling != nil {
			out = append(out, mp)
		}
	}
	return out
}

// InitialReplicas returns the replicas a new cluster starts with, per
// machine pool: fixed pools at their count, scaled pools at their minimum.
func (s BlueprintSpec) InitialReplicas() map[string]int {
	out := make(map[string]int, len(s.MachinePools))
	for _, mp := range s.MachinePools {
		if mp.Replicas != nil {
			out[mp.Name] = *mp.Replicas
		} else {
			out[mp.Name] = mp.Autoscaling.Min
		}
	}
	return out
}

// CapacityPool is an organisation's pool of data-plane clusters made from one
// blueprint version, in one cloud, region and zone, scaled between
// MinClusters and MaxClusters as reservations fill it.
type CapacityPool struct {
	ID               string
	OrgID            string
	Owner            string
	Name             string
	BlueprintID      string
	BlueprintVersion int
	Cloud            Cloud
	Region           string
	Zone             string
	MinClusters      int
	MaxClusters      int
	// UnitsPerCluster is a cluster's capacity in the service's own units,
	// at its scaled machine pools' maximum replicas.
	UnitsPerCluster int
	// ScaleUpPercent: a cluster whose reserved units reach this share of what
	// its current nodes hold gets a step more nodes.
	ScaleUpPercent int
	// AddClusterPercent: when every cluster of the pool has reserved this
	// share of its capacity, a cluster is added (below MaxClusters).
	AddClusterPercent int
	HasCredentials    bool
	Generation        int64
	// Clusters counts the pool's clusters not being removed; ReservedUnits
	// the units booked on them.
	Clusters      int
	ReservedUnits int64
	// Conditions are pool_mgr's view of the pool (PoolConditions).
	Conditions          Conditions
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
}

// Phase of a pool, derived from its conditions (PoolPhase).
func (p CapacityPool) Phase() string { return PoolPhase(p.Conditions, p.DeletionRequestedAt != nil) }

// PoolCredentials are what Hive installs a pool's clusters with: the cloud
// account's secret keys and the pull secret. Stored sealed, never returned.
type PoolCredentials struct {
	Cloud      map[string]string `json:"cloud"`
	PullSecret string            `json:"pull_secret"`
}

// Validate checks credentials' shape; the error never holds a value.
func (c *PoolCredentials) Validate() error {
	if c == nil {
		return nil
	}
	if len(c.Cloud) == 0 || len(c.Cloud) > 16 {
		return Errorf(CodeValidation, "credentials.cloud must hold 1 to 16 keys")
	}
	for k, v := range c.Cloud {
		if !secretKey.MatchString(k) || v == "" || len(v) > 16<<10 {
			return Errorf(CodeValidation, "credentials.cloud: keys must be Secret data keys and values non-empty, at most 16 KiB")
		}
	}
	if c.PullSecret == "" || len(c.PullSecret) > 64<<10 || !json.Valid([]byte(c.PullSecret)) {
		return Errorf(CodeValidation, "credentials.pull_secret must be a pull secret's JSON, at most 64 KiB")
	}
	return nil
}

var secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)

// PoolCreate is what a caller asks a pool to be.
type PoolCreate struct {
	Name             string
	BlueprintID      string
	BlueprintVersion int
	Cloud            Cloud
	Region           string
	Zone             string
	MinClusters      int
	MaxClusters      int
	UnitsPerCluster  int
	// ScaleUpPercent and AddClusterPercent are 0 for the configured defaults.
	ScaleUpPercent    int
	AddClusterPercent int
	Credentials       *PoolCredentials
}

// The bounds of a pool's numbers.
const (
	MaxPoolClusters = 100
	maxPoolUnits    = 1_000_000
)

// Validate checks a pool request; errors carry CodeValidation.
func (c PoolCreate) Validate() error {
	if len(c.Name) > 40 || !dnsLabel.MatchString(c.Name) {
		return Errorf(CodeValidation, "name must be a DNS label of at most 40 characters")
	}
	if c.BlueprintID == "" || c.BlueprintVersion < 1 {
		return Errorf(CodeValidation, "blueprint_id and blueprint_version (from 1) are required")
	}
	if !slices.Contains(Clouds(), c.Cloud) {
		return Errorf(CodeValidation, "cloud is not one of %v", Clouds())
	}
	if !regionOrZone.MatchString(c.Region) {
		return Errorf(CodeValidation, "region must be a DNS label")
	}
	if c.Zone != "" && !regionOrZone.MatchString(c.Zone) {
		return Errorf(CodeValidation, "zone must be a DNS label")
	}
	if c.Credentials == nil {
		return Errorf(CodeValidation, "credentials are required: Hive installs the pool's clusters with them")
	}
	return validatePoolNumbers(c.MinClusters, c.MaxClusters, c.UnitsPerCluster, c.ScaleUpPercent, c.AddClusterPercent)
}

func validatePoolNumbers(minC, maxC, units, scaleUp, addCluster int) error {
	switch {
	case minC < 0 || maxC < 1 || minC > maxC || maxC > MaxPoolClusters:
		return Errorf(CodeValidation, "min_clusters and max_clusters need 0 <= min <= max, 1 <= max <= %d", MaxPoolClusters)
	case units < 1 || units > maxPoolUnits:
		return Errorf(CodeValidation, "units_per_cluster must be 1 to %d", maxPoolUnits)
	case scaleUp != 0 && (scaleUp < 10 || scaleUp > 100):
		return Errorf(CodeValidation, "scale_up_percent must be 10 to 100")
	case addCluster != 0 && (addCluster < 10 || addCluster > 100):
		return Errorf(CodeValidation, "add_cluster_percent must be 10 to 100")
	}
	return nil
}

// PoolUpdate changes a pool; nil fields are left alone.
type PoolUpdate struct {
	BlueprintVersion  *int
	MinClusters       *int
	MaxClusters       *int
	ScaleUpPercent    *int
	AddClusterPercent *int
	Credentials       *PoolCredentials
}

// Apply returns p with u applied, checked; errors carry CodeValidation.
func (u PoolUpdate) Apply(p CapacityPool) (CapacityPool, error) {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.BlueprintVersion, u.BlueprintVersion)
	set(&p.MinClusters, u.MinClusters)
	set(&p.MaxClusters, u.MaxClusters)
	set(&p.ScaleUpPercent, u.ScaleUpPercent)
	set(&p.AddClusterPercent, u.AddClusterPercent)
	if p.BlueprintVersion < 1 {
		return p, Errorf(CodeValidation, "blueprint_version must be from 1")
	}
	if err := u.Credentials.Validate(); err != nil {
		return p, err
	}
	return p, validatePoolNumbers(p.MinClusters, p.MaxClusters, p.UnitsPerCluster, p.ScaleUpPercent, p.AddClusterPercent)
}

// PoolClusterState is what a pool's cluster is doing, derived from its
// registration, its Hive objects as the hub reports them, and its replicas.
type PoolClusterState string

// The states of a pool's cluster.
const (
	PoolClusterProvisioning   PoolClusterState = "provisioning"
	PoolClusterReady          PoolClusterState = "ready"
	PoolClusterScaling        PoolClusterState = "scaling"
	PoolClusterFailed         PoolClusterState = "failed"
	PoolClusterDeprovisioning PoolClusterState = "deprovisioning"
)

// PoolClusterStates lists the states, in the API's order.
func PoolClusterStates() []PoolClusterState {
	return []PoolClusterState{PoolClusterProvisioning, PoolClusterReady, PoolClusterScaling, PoolClusterFailed, PoolClusterDeprovisioning}
}

// PoolCluster is one cluster of a pool: a registration the pool made, with
// the pool's view of it.
type PoolCluster struct {
	ID               string
	PoolID           string
	Name             string
	State            PoolClusterState
	Hub              *HubRef
	BlueprintVersion int
	// Replicas are the desired workers per machine pool; Nodes what the
	// hub reports of them (absent until reported).
	Replicas      map[string]int
	Nodes         map[string]int
	CapacityUnits int
	ReservedUnits int
	// HoldableUnits is what the current nodes hold (CapacityUnits at the
	// scaled pools' maximum).
	HoldableUnits int
	APIURL        string
	ConsoleURL    string
	Capacity      map[string]string
	Allocatable   map[string]string
	// AddOns are its add-ons' ManifestWorks, as the hub reports them.
	AddOns    []AddOnStatus
	CreatedAt time.Time
	ScaledAt  *time.Time
}

// AddOnStatus is one add-on's ManifestWork on a pool cluster: its Applied
// condition as RHACM's work agent set it (Unknown until it did), with the
// reason it gave; the message is what the refused manifests' own Applied
// conditions say (the managed cluster's cause), or else the work
// condition's (the message cut as the store reads it). Available is the
// work's Available condition (Unknown until the agent set it).
type AddOnStatus struct {
	Name      string          `json:"name"`
	Applied   ConditionStatus `json:"applied"`
	Available ConditionStatus `json:"available"`
	Reason    string          `json:"reason"`
	Message   string          `json:"message"`
}

// FreeUnits is what a cluster can still take.
func (c PoolCluster) FreeUnits() int { return c.CapacityUnits - c.ReservedUnits }

// Reservation is room booked for one service instance on one pool cluster.
type Reservation struct {
	ID         string
	PoolID     string
	ClusterID  string
	OrgID      string
	Owner      string
	Units      int
	InstanceID string
	CreatedAt  time.Time
}

// ReservationCreate asks for room for one instance.
type ReservationCreate struct {
	Units int
	// InstanceID names the service instance, for the service's own books.
	InstanceID string
}

// Validate checks a reservation request.
func (c ReservationCreate) Validate() error {
	if c.Units < 1 || c.Units > maxPoolUnits {
		return Errorf(CodeValidation, "units must be 1 to %d", maxPoolUnits)
	}
	if len(c.InstanceID) > 128 || strings.ContainsFunc(c.InstanceID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Errorf(CodeValidation, "instance_id must be at most 128 printable characters")
	}
	return nil
}

// PoolEvent is one decision the scaler or the pool reconciler took.
type PoolEvent struct {
	ID        int64
	PoolID    string
	ClusterID string
	// Type is what was done (PoolEvent* constants); Reason why; Message the detail.
	Type    string
	Reason  string
	Message string
	At      time.Time
}

// The pool event types.
const (
	PoolEventClusterAdded      = "ClusterAdded"
	PoolEventClusterRemoved    = "ClusterRemoved"
	PoolEventNodesScaledUp     = "NodesScaledUp"
	PoolEventNodesScaledDown   = "NodesScaledDown"
	PoolEventClusterUpgraded   = "BlueprintVersionApplied"
	PoolEventAddOnsDelivered   = "AddOnsDelivered"
	PoolEventCapacityExhausted = "CapacityExhausted"
	// PoolEventClusterNotAdded: the scaler wanted a cluster and the
	// organisation's limits refused it (reason PoolEventReasonQuotaExceeded).
	PoolEventClusterNotAdded = "ClusterNotAdded"
)

// PoolEventReasonQuotaExceeded is the reason of a ClusterNotAdded event and
// of the QuotaAvailable condition's False.
const PoolEventReasonQuotaExceeded = "QuotaExceeded"

// BlueprintService keeps an organisation's blueprints and their versions;
// every call is scoped to the caller's organisation.
type BlueprintService interface {
	// CreateBlueprint stores a blueprint and its version 1. Errors:
	// CodeValidation, CodeNameTaken, CodeOrgNotAllowed.
	CreateBlueprint(ctx context.Context, caller Identity, name string, spec BlueprintSpec) (Blueprint, error)
	ListBlueprints(ctx context.Context, org string, q ListQuery) ([]Blueprint, int, error)
	FindBlueprint(ctx context.Context, org, id string) (Blueprint, error)
	// DeleteBlueprint deletes a blueprint no live pool uses. Errors:
	// CodeNotFound, CodeConflict.
	DeleteBlueprint(ctx context.Context, permit Permit, org, id string) error
	// CreateBlueprintVersion stores a blueprint's next version.
	CreateBlueprintVersion(ctx context.Context, permit Permit, caller Identity, id string, spec BlueprintSpec) (BlueprintVersion, error)
	ListBlueprintVersions(ctx context.Context, org, id string, q ListQuery) ([]BlueprintVersion, int, error)
	FindBlueprintVersion(ctx context.Context, org, id string, version int) (BlueprintVersion, error)
	// DeleteBlueprintVersion deletes a version no live pool uses, not the
	// latest. Errors: CodeNotFound, CodeConflict.
	DeleteBlueprintVersion(ctx context.Context, permit Permit, org, id string, version int) error
}

// PoolService keeps an organisation's capacity pools and reservations;
// every call is scoped to the caller's organisation. Its OrgLimitsAdmin side
// reads and sets organisations' limits of them, for administrators.
type PoolService interface {
	OrgLimitsAdmin
	// CreatePool stores a pool. Errors: CodeValidation, CodeNameTaken,
	// CodeZoneNotServed, CodeOrgNotAllowed, CodePoolQuotaExceeded.
	CreatePool(ctx context.Context, caller Identity, create PoolCreate) (CapacityPool, error)
	ListPools(ctx context.Context, org string, q ListQuery) ([]CapacityPool, int, error)
	FindPool(ctx context.Context, org, id string) (CapacityPool, error)
	// UpdatePool changes a pool under If-Match. Errors: CodeNotFound,
	// CodeValidation, CodePreconditionFailed, CodeConflict (being deleted).
	UpdatePool(ctx context.Context, permit Permit, org, id string, match *int64, update PoolUpdate) (CapacityPool, error)
	// RequestPoolDeletion starts a pool's deletion. Errors: CodeNotFound,
	// CodePreconditionFailed, CodeConflict (reservations held).
	RequestPoolDeletion(ctx context.Context, permit Permit, org, id string, match *int64) error
	ListPoolClusters(ctx context.Context, org, poolID string, q ListQuery) ([]PoolCluster, int, error)
	ListPoolEvents(ctx context.Context, org, poolID string, q ListQuery) ([]PoolEvent, int, error)
	// CreateReservation books units on the fullest cluster with room.
	// Errors: CodeValidation, CodeNotFound, CodeCapacityExhausted,
	// CodePoolQuotaExceeded, CodeConflict (pool being deleted).
	CreateReservation(ctx context.Context, caller Identity, poolID string, create ReservationCreate) (Reservation, error)
	ListReservations(ctx context.Context, org, poolID string, q ListQuery) ([]Reservation, int, error)
	FindReservation(ctx context.Context, org, poolID, id string) (Reservation, error)
	// DeleteReservation releases a reservation. Errors: CodeNotFound.
	DeleteReservation(ctx context.Context, permit Permit, org, poolID, id string) error
}
