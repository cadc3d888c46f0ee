package fleet_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func ptr[T any](v T) *T { return &v }

// testBlueprint has a fixed infra pool and a workers pool the scaler sizes
// from 2 to 6 nodes.
func testBlueprint() fleet.BlueprintSpec {
	return fleet.BlueprintSpec{Release: "4.16.3", ControlPlane: fleet.SizeMedium, MachinePools: []fleet.MachinePoolSpec{
		{Name: "infra", Size: fleet.SizeSmall, Replicas: ptr(2)},
		{Name: "workers", Size: fleet.SizeLarge, Autoscaling: &fleet.Autoscaling{Min: 2, Max: 6}},
	}}
}

func testPool() fleet.CapacityPool {
	return fleet.CapacityPool{ID: "p1", BlueprintVersion: 1, MinClusters: 2, MaxClusters: 4, UnitsPerCluster: 60}
}

func readyCluster(id string, workers, reserved int) fleet.ScalerCluster {
	return fleet.ScalerCluster{ID: id, State: fleet.PoolClusterReady, BlueprintVersion: 1,
		Replicas: map[string]int{"infra": 2, "workers": workers}, CapacityUnits: 60, ReservedUnits: reserved, Joined: true}
}

func actionTypes(actions []fleet.ScaleAction) []string {
	out := make([]string, len(actions))
	for i, a := range actions {
		out[i] = a.Type + "/" + a.Reason + "/" + a.ClusterID
	}
	return out
}

func TestScaleRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cfg := fleet.DefaultScalerConfig()
	longAgo, recently := now.Add(-time.Hour), now.Add(-time.Minute)
	withScaled := func(c fleet.ScalerCluster, at time.Time) fleet.ScalerCluster { c.ScaledAt = &at; return c }
	emptySince := func(c fleet.ScalerCluster, at time.Time) fleet.ScalerCluster { c.EmptySince = &at; return c }
	state := func(c fleet.ScalerCluster, s fleet.PoolClusterState) fleet.ScalerCluster { c.State = s; return c }
	deleting := testPool()
	deleting.DeletionRequestedAt = &now
	moved := testPool()
	moved.BlueprintVersion = 2
	for _, tc := range []struct {
		name      string
		pool      fleet.CapacityPool
		clusters  []fleet.ScalerCluster
		exhausted bool
		want      []string
	}{
		{name: "an empty pool gets its minimum", pool: testPool(),
			want: []string{"ClusterAdded/BelowMinimum/", "ClusterAdded/BelowMinimum/"}},
		{name: "a quiet pool at its minimum changes nothing", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 2, 5), readyCluster("b", 2, 0)}},
		// 2 of 6 workers hold 20 of 60 units; 16 is 80% of them.
		{name: "a cluster at the node threshold gets a step", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 2, 16), readyCluster("b", 2, 0)},
			want:     []string{"NodesScaledUp/ThresholdReached/a"}},
		{name: "a cluster at its maximum nodes gets none", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 59), readyCluster("b", 2, 0)}},
		{name: "nodes go down only after the cool-down", pool: testPool(),
			clusters: []fleet.ScalerCluster{withScaled(readyCluster("a", 4, 0), recently), readyCluster("b", 2, 0)}},
		{name: "nodes go down after the cool-down", pool: testPool(),
			clusters: []fleet.ScalerCluster{withScaled(readyCluster("a", 4, 0), longAgo), readyCluster("b", 2, 0)},
			want:     []string{"NodesScaledDown/BelowThreshold/a"}},
		// 3 workers hold 30; a step lower holds 20, and 11 is not below 60% of it.
		{name: "hysteresis keeps nodes a step lower would crowd", pool: testPool(),
			clusters: []fleet.ScalerCluster{withScaled(readyCluster("a", 3, 13), longAgo), readyCluster("b", 2, 0)}},
		{name: "every cluster past the add threshold adds one", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 55), readyCluster("b", 6, 54)},
			want:     []string{"ClusterAdded/PoolFull/"}},
		{name: "no cluster is added at the maximum", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 55), readyCluster("b", 6, 54), readyCluster("c", 6, 55), readyCluster("d", 6, 58)}},
		{name: "one cluster at a time is added", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 55), readyCluster("b", 6, 54), state(readyCluster("c", 2, 0), fleet.PoolClusterProvisioning)}},
		{name: "a refused reservation adds a cluster", pool: testPool(), exhausted: true,
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 30), readyCluster("b", 6, 30)},
			want:     []string{"ClusterAdded/NoRoomForReservation/"}},
		{name: "an idle cluster above the minimum goes", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 2, 5), readyCluster("b", 2, 0), emptySince(readyCluster("c", 2, 0), longAgo)},
			want:     []string{"ClusterRemoved/Idle/c"}},
		{name: "a recently emptied cluster stays", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 2, 5), readyCluster("b", 2, 0), emptySince(readyCluster("c", 2, 0), recently)}},
		{name: "an idle cluster stays when the others would be crowded", pool: testPool(),
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 50), readyCluster("b", 6, 50), emptySince(readyCluster("c", 2, 0), longAgo)}},
		{name: "a failed cluster is removed and replaced", pool: testPool(),
			clusters: []fleet.ScalerCluster{state(readyCluster("a", 2, 0), fleet.PoolClusterFailed), readyCluster("b", 2, 0)},
			want:     []string{"ClusterRemoved/ProvisionFailed/a", "ClusterAdded/BelowMinimum/"}},
		{name: "a deleted pool removes every cluster", pool: deleting,
			clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), state(readyCluster("b", 2, 0), fleet.PoolClusterDeprovisioning)},
			want:     []string{"ClusterRemoved/PoolDeleted/a"}},
		{name: "a pool moved to another version moves its clusters", pool: moved,
			clusters: []fleet.ScalerCluster{readyCluster("a", 4, 0), readyCluster("b", 2, 0)},
			want:     []string{"BlueprintVersionApplied/PoolMovedVersion/a", "BlueprintVersionApplied/PoolMovedVersion/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			got := fleet.Scale(fleet.ScalerInput{Pool: tc.pool, Spec: testBlueprint(), Clusters: tc.clusters, Exhausted: tc.exhausted, Now: now}, cfg)
			g.Expect(actionTypes(got)).To(gomega.Equal(append([]string{}, tc.want...)))
		})
	}
}

func TestScaleStepsWithinBounds(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	now := time.Now()
	got := fleet.Scale(fleet.ScalerInput{Pool: testPool(), Spec: testBlueprint(), Now: now,
		Clusters: []fleet.ScalerCluster{readyCluster("a", 5, 49), readyCluster("b", 2, 0)}}, fleet.DefaultScalerConfig())
	g.Expect(got).To(gomega.HaveLen(1))
	g.Expect(got[0].Replicas).To(gomega.Equal(map[string]int{"infra": 2, "workers": 6}))
	// A version move keeps the scaled pool's replicas within its new bounds.
	spec := testBlueprint()
	spec.MachinePools[1].Autoscaling = &fleet.Autoscaling{Min: 1, Max: 3}
	pool := testPool()
	pool.BlueprintVersion = 2
	got = fleet.Scale(fleet.ScalerInput{Pool: pool, Spec: spec, Now: now,
		Clusters: []fleet.ScalerCluster{readyCluster("a", 5, 0), readyCluster("b", 2, 0)}}, fleet.DefaultScalerConfig())
	g.Expect(got[0].Replicas).To(gomega.Equal(map[string]int{"infra": 2, "workers": 3}))
	g.Expect(got[1].Replicas).To(gomega.Equal(map[string]int{"infra": 2, "workers": 2}))
}

func TestAddOnsGoOnceJoined(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	spec := testBlueprint()
	spec.AddOns = []fleet.AddOn{{Name: "observability", Manifests: []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}}}}}
	notJoined := readyCluster("b", 2, 0)
	notJoined.Joined, notJoined.State = false, fleet.PoolClusterProvisioning
	got := fleet.Scale(fleet.ScalerInput{Pool: testPool(), Spec: spec, Now: time.Now(),
		Clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), notJoined}}, fleet.DefaultScalerConfig())
	g.Expect(actionTypes(got)).To(gomega.Equal([]string{"AddOnsDelivered/ClusterJoined/a"}))
}

// TestInstallClusterName: the name a pool cluster is installed under meets
// the installer's rules (at most 54 characters, from a lower-case letter)
// and stays unique by the registration id's suffix.
func TestInstallClusterName(t *testing.T) {
	t.Parallel()
	id := "0d3c5a8e-1111-2222-3333-444455556666"
	for name, want := range map[string]string{
		"pool-a-1f2e3d": "pool-a-1f2e3d-55556666",
		"1pool-1f2e3d":  "c1pool-1f2e3d-55556666",
		"p" + strings.Repeat("o", 38) + "l-1f2e3d": "p" + strings.Repeat("o", 38) + "l-1f2e-55556666",
	} {
		got := fleet.InstallClusterName(fleet.Registration{ID: id, Name: name})
		if got != want {
			t.Errorf("InstallClusterName(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestBlueprintValidation(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	g.Expect(testBlueprint().Validate()).To(gomega.Succeed())
	for name, mutate := range map[string]func(*fleet.BlueprintSpec){
		"release":            func(s *fleet.BlueprintSpec) { s.Release = "latest" },
		"architecture":       func(s *fleet.BlueprintSpec) { s.Architecture = "x86_64" },
		"control_plane_size": func(s *fleet.BlueprintSpec) { s.ControlPlane = "huge" },
		"machine_pools must": func(s *fleet.BlueprintSpec) { s.MachinePools = nil },
		"either replicas":    func(s *fleet.BlueprintSpec) { s.MachinePools[0].Autoscaling = &fleet.Autoscaling{Min: 1, Max: 2} },
		"autoscaling needs":  func(s *fleet.BlueprintSpec) { s.MachinePools[1].Autoscaling.Min = 7 },
		"used twice":         func(s *fleet.BlueprintSpec) { s.MachinePools[1].Name = "infra" },
		"taints[0]": func(s *fleet.BlueprintSpec) {
			s.MachinePools[0].Taints = []fleet.Taint{{Key: "k", Effect: "Sometimes"}}
		},
		"overrides: the key": func(s *fleet.BlueprintSpec) { s.Overrides = map[fleet.Cloud]fleet.CloudOverride{"ibm": {}} },
		"names a machine pool": func(s *fleet.BlueprintSpec) {
			s.Overrides = map[fleet.Cloud]fleet.CloudOverride{"aws": {MachinePoolInstanceTypes: map[string]string{"gpu": "p4d.24xlarge"}}}
		},
		"metadata.name": func(s *fleet.BlueprintSpec) {
			s.AddOns = []fleet.AddOn{{Name: "obs", Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "Not_A_Name"}}}}}
		},
		"status is set": func(s *fleet.BlueprintSpec) {
			s.AddOns = []fleet.AddOn{{Name: "obs", Manifests: []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "a"}, "status": map[string]any{}}}}}
		},
		"apiVersion": func(s *fleet.BlueprintSpec) {
			s.AddOns = []fleet.AddOn{{Name: "obs", Manifests: []map[string]any{{"apiVersion": "apps//v1", "kind": "Deployment", "metadata": map[string]any{"name": "a"}}}}}
		},
	} {
		spec := testBlueprint()
		mutate(&spec)
		err := spec.Validate()
		g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeValidation), name)
		g.Expect(fleet.ErrorMessageOf(err)).To(gomega.ContainSubstring(name))
	}
}

func TestPoolClusterObjects(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	spec := testBlueprint()
	spec.Overrides = map[fleet.Cloud]fleet.CloudOverride{fleet.CloudAWS: {MachinePoolInstanceTypes: map[string]string{"workers": "r6i.4xlarge"}}}
	spec.AddOns = []fleet.AddOn{{Name: "observability", Manifests: []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "observability"}}}}}
	reg := fleet.Registration{ID: "0d3c5a8e-1111-2222-3333-444455556666", OrgID: "org-a", Name: "pool-a-1"}
	d := fleet.PoolClusterDelivery{PoolID: "p1", Cloud: fleet.CloudAWS, Region: "us-east-1", BlueprintVersion: 1, Spec: spec,
		Replicas: map[string]int{"infra": 2, "workers": 3}, Credentials: &fleet.PoolCredentials{
			Cloud: map[string]string{"aws_access_key_id": "AKIA", "aws_secret_access_key": "secret"}, PullSecret: `{"auths":{}}`}}
	kinds := func(objs []map[string]any) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o["kind"].(string)+"/"+o["metadata"].(map[string]any)["name"].(string))
		}
		return out
	}
	objs := fleet.PoolClusterObjects(reg, "hub-1", d, fleet.DefaultPoolConfig())
	name := fleet.ManagedClusterName(reg)
	g.Expect(kinds(objs)).To(gomega.Equal([]string{"Namespace/" + name, "ManagedCluster/" + name, "KlusterletAddonConfig/" + name,
		"ClusterImageSet/" + name, "Secret/" + name + "-install-config", "Secret/" + name + "-cloud-credentials", "Secret/" + name + "-pull-secret",
		"ClusterDeployment/" + name, "MachinePool/" + name + "-infra", "MachinePool/" + name + "-workers"}))
	workers := objs[9]["spec"].(map[string]any)
	g.Expect(workers["replicas"]).To(gomega.Equal(int64(3)))
	g.Expect(workers["platform"]).To(gomega.HaveKeyWithValue("aws", gomega.HaveKeyWithValue("type", "r6i.4xlarge")))
	infra := objs[8]["spec"].(map[string]any)
	g.Expect(infra["platform"]).To(gomega.HaveKeyWithValue("aws", gomega.HaveKeyWithValue("type", "m6i.xlarge")))
	g.Expect(objs[3]["spec"]).To(gomega.HaveKeyWithValue("releaseImage", "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"))
	var ic map[string]any
	g.Expect(json.Unmarshal([]byte(objs[4]["stringData"].(map[string]any)["install-config.yaml"].(string)), &ic)).To(gomega.Succeed())
	g.Expect(ic["platform"]).To(gomega.HaveKeyWithValue("aws", gomega.HaveKeyWithValue("region", "us-east-1")))
	g.Expect(ic["controlPlane"]).To(gomega.HaveKeyWithValue("platform", gomega.HaveKeyWithValue("aws", gomega.HaveKeyWithValue("type", "m6i.2xlarge"))))
	// On Azure, the DNS zone's resource group is the deployment's.
	azure := d
	azure.Cloud = fleet.CloudAzure
	cfg := fleet.DefaultPoolConfig()
	cfg.AzureBaseDomainResourceGroup = "dns-rg"
	cd := fleet.PoolClusterObjects(reg, "hub-1", azure, cfg)[7]
	g.Expect(cd["spec"]).To(gomega.HaveKeyWithValue("platform", gomega.HaveKeyWithValue("azure",
		gomega.HaveKeyWithValue("baseDomainResourceGroupName", "dns-rg"))))
	// The installer needs, on GCP, the project to make the cluster in and,
	// on Azure, the DNS zone's resource group, in the install-config itself.
	cfg.GCPProjectID = "fleet-pools-1"
	installConfig := func(d fleet.PoolClusterDelivery) map[string]any {
		var ic map[string]any
		objs := fleet.PoolClusterObjects(reg, "hub-1", d, cfg)
		g.Expect(json.Unmarshal([]byte(objs[4]["stringData"].(map[string]any)["install-config.yaml"].(string)), &ic)).To(gomega.Succeed())
		return ic
	}
	g.Expect(installConfig(azure)["platform"]).To(gomega.HaveKeyWithValue("azure", gomega.HaveKeyWithValue("baseDomainResourceGroupName", "dns-rg")))
	gcp := d
	gcp.Cloud = fleet.CloudGCP
	g.Expect(installConfig(gcp)["platform"]).To(gomega.HaveKeyWithValue("gcp", gomega.HaveKeyWithValue("projectID", "fleet-pools-1")))
	// An arm64 blueprint installs an aarch64 release on arm64 machines of
	// arm64 instance types.
	arm := d
	arm.Spec.Architecture = fleet.ArchARM64
	arm.Spec.Overrides = nil
	objs = fleet.PoolClusterObjects(reg, "hub-1", arm, cfg)
	g.Expect(objs[3]["spec"]).To(gomega.HaveKeyWithValue("releaseImage", "quay.io/openshift-release-dev/ocp-release:4.16.3-aarch64"))
	g.Expect(objs[9]["spec"]).To(gomega.HaveKeyWithValue("platform", gomega.HaveKeyWithValue("aws", gomega.HaveKeyWithValue("type", "m6g.4xlarge"))))
	ic = installConfig(arm)
	g.Expect(ic["controlPlane"]).To(gomega.And(gomega.HaveKeyWithValue("architecture", "arm64"),
		gomega.HaveKeyWithValue("platform", gomega.HaveKeyWithValue("aws", gomega.HaveKeyWithValue("type", "m6g.2xlarge")))))
	g.Expect(ic["compute"]).To(gomega.ConsistOf(gomega.HaveKeyWithValue("architecture", "arm64")))
	// Joined: the add-ons go as ManifestWorks in the cluster's namespace.
	d.AddOns = true
	objs = fleet.PoolClusterObjects(reg, "hub-1", d, fleet.DefaultPoolConfig())
	g.Expect(kinds(objs)[len(objs)-1]).To(gomega.Equal("ManifestWork/addon-observability"))
	g.Expect(objs[len(objs)-1]["metadata"]).To(gomega.HaveKeyWithValue("namespace", name))
	for _, o := range objs {
		labels := o["metadata"].(map[string]any)["labels"].(map[string]any)
		g.Expect(labels).To(gomega.HaveKeyWithValue(fleet.LabelHubID, "hub-1"), kinds([]map[string]any{o})[0])
		g.Expect(labels).To(gomega.HaveKeyWithValue(fleet.LabelRegistrationID, reg.ID))
	}
}

func TestPoolRequestsValidation(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	creds := &fleet.PoolCredentials{Cloud: map[string]string{"aws_access_key_id": "a"}, PullSecret: `{"auths":{}}`}
	ok := fleet.PoolCreate{Name: "kafka-eu", BlueprintID: "b", BlueprintVersion: 1, Cloud: fleet.CloudAWS, Region: "eu-west-1",
		MinClusters: 2, MaxClusters: 4, UnitsPerCluster: 60, Credentials: creds}
	g.Expect(ok.Validate()).To(gomega.Succeed())
	for name, mutate := range map[string]func(*fleet.PoolCreate){
		"min_clusters":     func(c *fleet.PoolCreate) { c.MinClusters = 5 },
		"units_per":        func(c *fleet.PoolCreate) { c.UnitsPerCluster = 0 },
		"cloud is not":     func(c *fleet.PoolCreate) { c.Cloud = "ibm" },
		"credentials are":  func(c *fleet.PoolCreate) { c.Credentials = nil },
		"scale_up_percent": func(c *fleet.PoolCreate) { c.ScaleUpPercent = 5 },
		"name must":        func(c *fleet.PoolCreate) { c.Name = strings.Repeat("a", 41) },
	} {
		c := ok
		mutate(&c)
		g.Expect(fleet.ErrorMessageOf(c.Validate())).To(gomega.ContainSubstring(name), name)
	}
	bad := &fleet.PoolCredentials{Cloud: map[string]string{"key": "s3cr3t-value"}, PullSecret: "not json s3cr3t-value"}
	g.Expect(fleet.ErrorMessageOf(bad.Validate())).NotTo(gomega.ContainSubstring("s3cr3t"))
	g.Expect(fleet.ReservationCreate{Units: 0}.Validate()).To(gomega.HaveOccurred())
	g.Expect(fleet.ReservationCreate{Units: 3, InstanceID: "kafka-1"}.Validate()).To(gomega.Succeed())
}

func TestWakePointsAreWhereTheScalerActs(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	pool := testPool() // min 2, max 4, 60 units
	in := fleet.ScalerInput{Pool: pool, Spec: testBlueprint(), Now: time.Now(), Clusters: []fleet.ScalerCluster{
		readyCluster("a", 2, 10), readyCluster("b", 6, 10), readyCluster("gone", 2, 0),
	}}
	actions := []fleet.ScaleAction{
		{Type: fleet.PoolEventNodesScaledUp, ClusterID: "a", Replicas: map[string]int{"infra": 2, "workers": 3}},
		{Type: fleet.PoolEventClusterRemoved, ClusterID: "gone"},
	}
	// a: 3 of 6 workers hold 30, 80% of them is 24; 90% of 60 is 54.
	// b: at its maximum nodes, only the cluster threshold is left.
	g.Expect(fleet.WakePoints(in, actions, fleet.DefaultScalerConfig())).To(gomega.Equal(map[string]int{"a": 24, "b": 54}))
	// At max_clusters and maximum nodes, a booking never needs the scaler.
	in.Pool.MaxClusters = 2
	g.Expect(fleet.WakePoints(in, actions, fleet.DefaultScalerConfig())).To(gomega.Equal(map[string]int{"a": 24, "b": 61}))
	// The points agree with Scale: one unit below, nothing; at it, a step.
	c := readyCluster("a", 3, 23)
	g.Expect(fleet.Scale(fleet.ScalerInput{Pool: in.Pool, Spec: in.Spec, Now: in.Now, Clusters: []fleet.ScalerCluster{c, readyCluster("b", 2, 0)}},
		fleet.DefaultScalerConfig())).To(gomega.BeEmpty())
	c.ReservedUnits = 24
	g.Expect(actionTypes(fleet.Scale(fleet.ScalerInput{Pool: in.Pool, Spec: in.Spec, Now: in.Now, Clusters: []fleet.ScalerCluster{c, readyCluster("b", 2, 0)}},
		fleet.DefaultScalerConfig()))).To(gomega.Equal([]string{"NodesScaledUp/ThresholdReached/a"}))
}

func TestPoolConditionsAndPhase(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	cfg := fleet.DefaultScalerConfig()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	provisioning := readyCluster("c", 2, 0)
	provisioning.State = fleet.PoolClusterProvisioning
	failed := readyCluster("f", 2, 0)
	failed.State = fleet.PoolClusterFailed
	for _, tc := range []struct {
		name     string
		pool     func(*fleet.CapacityPool)
		clusters []fleet.ScalerCluster
		actions  []fleet.ScaleAction
		phase    string
		reason   string
	}{
		{name: "new", actions: []fleet.ScaleAction{{Type: fleet.PoolEventClusterAdded}, {Type: fleet.PoolEventClusterAdded}},
			phase: "provisioning", reason: fleet.ReasonBelowMinimum},
		{name: "one of two joined", clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), provisioning, failed},
			phase: "provisioning", reason: fleet.ReasonBelowMinimum},
		{name: "minimum joined", clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), readyCluster("b", 2, 0)},
			phase: "ready", reason: fleet.ReasonMinimumReady},
		{name: "at its maximum, every cluster full", pool: func(p *fleet.CapacityPool) { p.MaxClusters = 2 },
			clusters: []fleet.ScalerCluster{readyCluster("a", 6, 55), readyCluster("b", 6, 57)}, phase: "full", reason: fleet.ReasonMinimumReady},
		{name: "below its maximum, every cluster full", clusters: []fleet.ScalerCluster{readyCluster("a", 6, 55), readyCluster("b", 6, 57)},
			phase: "ready", reason: fleet.ReasonMinimumReady},
		{name: "deleting", pool: func(p *fleet.CapacityPool) { p.DeletionRequestedAt = &now },
			clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), readyCluster("b", 2, 0)}, phase: "deleting", reason: fleet.ReasonPoolDeleting},
	} {
		pool := testPool()
		if tc.pool != nil {
			tc.pool(&pool)
		}
		cs := fleet.PoolConditions(nil, fleet.ScalerInput{Pool: pool, Spec: testBlueprint(), Clusters: tc.clusters, Now: now}, tc.actions, cfg)
		g.Expect(fleet.PoolPhase(cs, pool.DeletionRequestedAt != nil)).To(gomega.Equal(tc.phase), tc.name)
		g.Expect(cs.Reason(fleet.PoolConditionReady)).To(gomega.Equal(tc.reason), tc.name)
	}
	cs := fleet.PoolConditions(nil, fleet.ScalerInput{Pool: testPool(), Spec: testBlueprint(), Now: now,
		Clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), provisioning, failed}}, nil, cfg)
	ready, _ := cs.Get(fleet.PoolConditionReady)
	g.Expect(ready.Message).To(gomega.Equal("1 of 2 clusters ready (minimum 2, maximum 4); 1 failed"))
	// A later pass with the same view keeps the transition time.
	later := fleet.PoolConditions(cs, fleet.ScalerInput{Pool: testPool(), Spec: testBlueprint(), Now: now.Add(time.Hour),
		Clusters: []fleet.ScalerCluster{readyCluster("a", 2, 0), provisioning, failed}}, nil, cfg)
	g.Expect(later.Equal(cs)).To(gomega.BeTrue())
}
