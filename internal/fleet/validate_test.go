package fleet_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// validCreate is a registration request that passes validation.
func validCreate() fleet.RegistrationCreate {
	return fleet.RegistrationCreate{Name: "prod-1", DisplayName: "Production 1", Zone: "eu", Region: "eu-west-1",
		Product: fleet.ProductOCP, Labels: map[string]string{"env": "prod"}}
}

// nLabels returns n valid labels.
func nLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func TestRegistrationCreateValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*fleet.RegistrationCreate)
		valid  bool
	}{
		{"valid", func(*fleet.RegistrationCreate) {}, true},
		{"one-character name", func(c *fleet.RegistrationCreate) { c.Name = "a" }, true},
		{"63-character name", func(c *fleet.RegistrationCreate) { c.Name = strings.Repeat("a", 63) }, true},
		{"digits and dashes", func(c *fleet.RegistrationCreate) { c.Name = "0-a-9" }, true},
		{"empty name", func(c *fleet.RegistrationCreate) { c.Name = "" }, false},
		{"64-character name", func(c *fleet.RegistrationCreate) { c.Name = strings.Repeat("a", 64) }, false},
		{"upper-case name", func(c *fleet.RegistrationCreate) { c.Name = "Prod" }, false},
		{"name starts with a dash", func(c *fleet.RegistrationCreate) { c.Name = "-prod" }, false},
		{"name ends with a dash", func(c *fleet.RegistrationCreate) { c.Name = "prod-" }, false},
		{"dotted name", func(c *fleet.RegistrationCreate) { c.Name = "prod.1" }, false},
		{"underscore in the name", func(c *fleet.RegistrationCreate) { c.Name = "prod_1" }, false},
		{"name with a newline", func(c *fleet.RegistrationCreate) { c.Name = "prod\n" }, false},
		{"empty display name", func(c *fleet.RegistrationCreate) { c.DisplayName = "" }, true},
		{"256-character display name", func(c *fleet.RegistrationCreate) { c.DisplayName = strings.Repeat("x", 256) }, true},
		{"257-character display name", func(c *fleet.RegistrationCreate) { c.DisplayName = strings.Repeat("x", 257) }, false},
		{"256 non-ASCII characters", func(c *fleet.RegistrationCreate) { c.DisplayName = strings.Repeat("é", 256) }, true},
		{"257 non-ASCII characters", func(c *fleet.RegistrationCreate) { c.DisplayName = strings.Repeat("é", 257) }, false},
		{"no zone (the store defaults it)", func(c *fleet.RegistrationCreate) { c.Zone = "" }, true},
		{"upper-case zone", func(c *fleet.RegistrationCreate) { c.Zone = "EU" }, false},
		{"zone with a dot", func(c *fleet.RegistrationCreate) { c.Zone = "eu.west" }, false},
		{"64-character zone", func(c *fleet.RegistrationCreate) { c.Zone = strings.Repeat("z", 64) }, false},
		{"no region", func(c *fleet.RegistrationCreate) { c.Region = "" }, true},
		{"region with a space", func(c *fleet.RegistrationCreate) { c.Region = "eu west" }, false},
		{"region ends with a dash", func(c *fleet.RegistrationCreate) { c.Region = "eu-" }, false},
		{"no product", func(c *fleet.RegistrationCreate) { c.Product = "" }, false},
		{"unknown product", func(c *fleet.RegistrationCreate) { c.Product = "OpenStack" }, false},
		{"product in the wrong case", func(c *fleet.RegistrationCreate) { c.Product = "ocp" }, false},
		{"no labels", func(c *fleet.RegistrationCreate) { c.Labels = nil }, true},
		{"64 labels", func(c *fleet.RegistrationCreate) { c.Labels = nLabels(64) }, true},
		{"65 labels", func(c *fleet.RegistrationCreate) { c.Labels = nLabels(65) }, false},
		{"bad label", func(c *fleet.RegistrationCreate) { c.Labels = map[string]string{"-x": "y"} }, false},
		{"kubeconfig", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1"}
		}, true},
		{"api url and token", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{APIURL: "https://api.example.com:6443", Token: "sha256~x"}
		}, true},
		{"empty credentials", func(c *fleet.RegistrationCreate) { c.Credentials = &fleet.ImportCredentials{} }, false},
		{"kubeconfig and token", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1", Token: "sha256~x"}
		}, false},
		{"kubeconfig and api url", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1", APIURL: "https://api.example.com"}
		}, false},
		{"kubeconfig, api url and token", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{Kubeconfig: "apiVersion: v1", APIURL: "https://api.example.com", Token: "t"}
		}, false},
		{"token without api url", func(c *fleet.RegistrationCreate) { c.Credentials = &fleet.ImportCredentials{Token: "sha256~x"} }, false},
		{"api url without token", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{APIURL: "https://api.example.com"}
		}, false},
		{"http api url", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{APIURL: "http://api.example.com", Token: "sha256~x"}
		}, false},
		{"api url not a URL", func(c *fleet.RegistrationCreate) {
			c.Credentials = &fleet.ImportCredentials{APIURL: "api.example.com", Token: "sha256~x"}
		}, false},
	}
	for _, tc := range tests {
		c := validCreate()
		tc.change(&c)
		checkValid(t, tc.name, fmt.Sprintf("RegistrationCreate{Name: %q, Zone: %q, Region: %q, Product: %q, %d labels}.Validate()",
			c.Name, c.Zone, c.Region, c.Product, len(c.Labels)), c.Validate(), tc.valid)
	}
}

// checkValid checks that err is nil when valid, else a CodeValidation error.
func checkValid(t *testing.T, name, call string, err error, valid bool) {
	t.Helper()
	switch {
	case valid && err != nil:
		t.Errorf("%s: %s = %v, want nil", name, call, err)
	case !valid && err == nil:
		t.Errorf("%s: %s = nil, want a validation error", name, call)
	case !valid && fleet.ErrorCodeOf(err) != fleet.CodeValidation:
		t.Errorf("%s: %s = %v (code %d), want code %d", name, call, err, fleet.ErrorCodeOf(err), fleet.CodeValidation)
	}
}

func TestValidateLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		labels map[string]string
		valid  bool
	}{
		{nil, true},
		{map[string]string{}, true},
		{map[string]string{"env": "prod"}, true},
		{map[string]string{"env": ""}, true},
		{map[string]string{"Env_1.x-y": "A.b_c-9"}, true},
		{map[string]string{"a": "b"}, true},
		{map[string]string{"fleet-manager.io/registration-id": "x"}, false},
		{map[string]string{"cluster.open-cluster-management.io/clusterset": "default"}, false},
		{map[string]string{"open-cluster-management.io/x": "y"}, false},
		{map[string]string{"example.com/fleet-manager.io": "y"}, true},
		{map[string]string{strings.Repeat("k", 63): strings.Repeat("v", 63)}, true},
		{map[string]string{"app.kubernetes.io/name": "x"}, true},
		{map[string]string{"example.com/tier-1": "gold"}, true},
		{map[string]string{"a-b.c1/x": "y"}, true},
		{map[string]string{strings.Repeat("p", 253) + "/x": "y"}, true},
		{map[string]string{"": "x"}, false},
		{map[string]string{strings.Repeat("k", 64): "v"}, false},
		{map[string]string{"-env": "v"}, false},
		{map[string]string{"env-": "v"}, false},
		{map[string]string{".env": "v"}, false},
		{map[string]string{"en v": "v"}, false},
		{map[string]string{"env:x": "v"}, false},
		{map[string]string{"env": strings.Repeat("v", 64)}, false},
		{map[string]string{"env": "-prod"}, false},
		{map[string]string{"env": "prod_"}, false},
		{map[string]string{"env": "pr od"}, false},
		{map[string]string{"env": "prod/1"}, false},
		{map[string]string{"/x": "y"}, false},
		{map[string]string{"example.com/": "y"}, false},
		{map[string]string{"Example.com/x": "y"}, false},
		{map[string]string{"example_com/x": "y"}, false},
		{map[string]string{"-example.com/x": "y"}, false},
		{map[string]string{"example..com/x": "y"}, false},
		{map[string]string{"a/b/c": "y"}, false},
		{map[string]string{strings.Repeat("p", 254) + "/x": "y"}, false},
		{nLabels(64), true},
		{nLabels(65), false},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%d labels", len(tc.labels))
		if len(tc.labels) <= 2 {
			name = fmt.Sprintf("%q", tc.labels)
		}
		checkValid(t, name, "ValidateLabels()", fleet.ValidateLabels(tc.labels), tc.valid)
	}
}

func TestRegistrationUpdateValidate(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	labels := func(m map[string]string) *map[string]string { return &m }
	tests := []struct {
		name  string
		u     fleet.RegistrationUpdate
		valid bool
	}{
		{"nothing", fleet.RegistrationUpdate{}, true},
		{"display name", fleet.RegistrationUpdate{DisplayName: str("Prod")}, true},
		{"empty display name", fleet.RegistrationUpdate{DisplayName: str("")}, true},
		{"256-character display name", fleet.RegistrationUpdate{DisplayName: str(strings.Repeat("x", 256))}, true},
		{"257-character display name", fleet.RegistrationUpdate{DisplayName: str(strings.Repeat("x", 257))}, false},
		{"256 non-ASCII characters", fleet.RegistrationUpdate{DisplayName: str(strings.Repeat("ü", 256))}, true},
		{"labels", fleet.RegistrationUpdate{Labels: labels(map[string]string{"env": "prod"})}, true},
		{"no labels", fleet.RegistrationUpdate{Labels: labels(nil)}, true},
		{"64 labels", fleet.RegistrationUpdate{Labels: labels(nLabels(64))}, true},
		{"65 labels", fleet.RegistrationUpdate{Labels: labels(nLabels(65))}, false},
		{"bad label value", fleet.RegistrationUpdate{Labels: labels(map[string]string{"env": "no way"})}, false},
		{"good name, bad labels", fleet.RegistrationUpdate{DisplayName: str("ok"), Labels: labels(map[string]string{"/": ""})}, false},
		{"bad name, good labels", fleet.RegistrationUpdate{DisplayName: str(strings.Repeat("x", 300)), Labels: labels(nil)}, false},
	}
	for _, tc := range tests {
		checkValid(t, tc.name, "RegistrationUpdate.Validate()", tc.u.Validate(), tc.valid)
	}
}

// ocmHub makes c a syncset-ocm hub with creds.
func ocmHub(c *fleet.HubCreate, creds map[string]string) {
	c.DeliveryMode, c.AgentIdentity, c.Credentials = fleet.DeliverySyncSetOCM, "", creds
	c.OCM = &fleet.OCMTarget{ClusterID: "2a8e0f1b", APIURL: "https://api.openshift.com"}
}

// hiveHub makes c a syncset-hive hub with creds.
func hiveHub(c *fleet.HubCreate, creds map[string]string) {
	c.DeliveryMode, c.AgentIdentity, c.Credentials = fleet.DeliverySyncSetHive, "", creds
	c.Hive = &fleet.HiveTarget{Namespace: "hub-eu-1", ClusterDeployment: "hub-eu-1"}
}

func TestHubCreateValidate(t *testing.T) {
	t.Parallel()
	offline := map[string]string{"offline_token": "t"}
	client := map[string]string{"client_id": "c", "client_secret": "s"}
	valid := func() fleet.HubCreate {
		return fleet.HubCreate{Name: "hub-eu-1", Zone: "eu", Region: "eu-west-1", CloudProvider: "aws",
			DeliveryMode: fleet.DeliveryAgent, Capacity: 100, AgentIdentity: "hub-eu-1-agent"}
	}
	tests := []struct {
		name   string
		change func(*fleet.HubCreate)
		valid  bool
	}{
		{"agent hub", func(*fleet.HubCreate) {}, true},
		{"syncset-ocm hub without identity", func(c *fleet.HubCreate) { ocmHub(c, offline) }, true},
		{"syncset-ocm hub with a client", func(c *fleet.HubCreate) { ocmHub(c, client) }, true},
		{"syncset-ocm hub with a token URL", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM.TokenURL = "https://sso.example.com/token" }, true},
		{"syncset-ocm hub on a loopback http API", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM.APIURL = "http://127.0.0.1:8000" }, true},
		{"syncset-ocm hub on a remote http API", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM.APIURL = "http://api.example.com" }, false},
		{"syncset-ocm hub, API URL with a query", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM.APIURL = "https://api.example.com?x=1" }, false},
		{"syncset-ocm hub, relative API URL", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM.APIURL = "api.example.com" }, false},
		{"syncset-ocm hub, bad cluster id", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM.ClusterID = "a/b" }, false},
		{"syncset-ocm hub without target", func(c *fleet.HubCreate) { ocmHub(c, offline); c.OCM = nil }, false},
		{"syncset-ocm hub without credentials", func(c *fleet.HubCreate) { ocmHub(c, nil) }, false},
		{"syncset-ocm hub with client id only", func(c *fleet.HubCreate) { ocmHub(c, map[string]string{"client_id": "c"}) }, false},
		{"syncset-ocm hub with client and token", func(c *fleet.HubCreate) {
			ocmHub(c, map[string]string{"client_id": "c", "client_secret": "s", "offline_token": "t"})
		}, false},
		{"syncset-hive hub", func(c *fleet.HubCreate) { hiveHub(c, map[string]string{"kubeconfig": "k"}) }, true},
		{"syncset-hive hub without kubeconfig", func(c *fleet.HubCreate) { hiveHub(c, map[string]string{"token": "t"}) }, false},
		{"syncset-hive hub without target", func(c *fleet.HubCreate) { hiveHub(c, map[string]string{"kubeconfig": "k"}); c.Hive = nil }, false},
		{"syncset-hive hub, bad namespace", func(c *fleet.HubCreate) {
			hiveHub(c, map[string]string{"kubeconfig": "k"})
			c.Hive.Namespace = "Hive"
		}, false},
		{"syncset-hive hub, dotted deployment name", func(c *fleet.HubCreate) {
			hiveHub(c, map[string]string{"kubeconfig": "k"})
			c.Hive.ClusterDeployment = "hub.eu"
		}, true},
		{"capacity 0", func(c *fleet.HubCreate) { c.Capacity = 0 }, true},
		{"capacity 1000000", func(c *fleet.HubCreate) { c.Capacity = 1_000_000 }, true},
		{"capacity 1000001", func(c *fleet.HubCreate) { c.Capacity = 1_000_001 }, false},
		{"negative capacity", func(c *fleet.HubCreate) { c.Capacity = -1 }, false},
		{"agent hub without identity", func(c *fleet.HubCreate) { c.AgentIdentity = "" }, false},
		{"no delivery mode", func(c *fleet.HubCreate) { c.DeliveryMode = "" }, false},
		{"unknown delivery mode", func(c *fleet.HubCreate) { c.DeliveryMode = "syncset" }, false},
		{"empty name", func(c *fleet.HubCreate) { c.Name = "" }, false},
		{"upper-case name", func(c *fleet.HubCreate) { c.Name = "Hub" }, false},
		{"64-character name", func(c *fleet.HubCreate) { c.Name = strings.Repeat("h", 64) }, false},
		{"no zone", func(c *fleet.HubCreate) { c.Zone = "" }, false},
		{"bad zone", func(c *fleet.HubCreate) { c.Zone = "eu_west" }, false},
		{"no region", func(c *fleet.HubCreate) { c.Region = "" }, false},
		{"bad region", func(c *fleet.HubCreate) { c.Region = "eu-west-1." }, false},
	}
	for _, tc := range tests {
		c := valid()
		tc.change(&c)
		checkValid(t, tc.name, fmt.Sprintf("HubCreate{Name: %q, Zone: %q, Region: %q, Mode: %q, Capacity: %d}.Validate()",
			c.Name, c.Zone, c.Region, c.DeliveryMode, c.Capacity), c.Validate(), tc.valid)
	}
}

func TestHubUpdateValidate(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	mode := func(m fleet.DeliveryMode) *fleet.DeliveryMode { return &m }
	agentHub := fleet.Hub{Name: "hub-a", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent, Capacity: 10, AgentIdentity: "a", PlacedCount: 4}
	syncHub := fleet.Hub{Name: "hub-s", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliverySyncSetOCM, Capacity: 10, PlacedCount: 4,
		OCM: &fleet.OCMTarget{ClusterID: "c1", APIURL: "https://api.openshift.com"}, HasCredentials: true}
	hive := &fleet.HiveTarget{Namespace: "hub-s", ClusterDeployment: "hub-s"}
	creds := func(m map[string]string) *map[string]string { return &m }
	tests := []struct {
		name    string
		current fleet.Hub
		u       fleet.HubUpdate
		valid   bool
	}{
		{"nothing", agentHub, fleet.HubUpdate{}, true},
		{"region", agentHub, fleet.HubUpdate{Region: str("eu-central-1")}, true},
		{"bad region", agentHub, fleet.HubUpdate{Region: str("EU")}, false},
		{"empty region", agentHub, fleet.HubUpdate{Region: str("")}, false},
		{"cloud provider", agentHub, fleet.HubUpdate{CloudProvider: str("gcp")}, true},
		{"capacity above placed", agentHub, fleet.HubUpdate{Capacity: num(5)}, true},
		{"capacity at placed", agentHub, fleet.HubUpdate{Capacity: num(4)}, true},
		{"capacity below placed", agentHub, fleet.HubUpdate{Capacity: num(3)}, false},
		{"capacity 0 with placements", agentHub, fleet.HubUpdate{Capacity: num(0)}, false},
		{"capacity 0 when empty", fleet.Hub{DeliveryMode: fleet.DeliveryAgent, AgentIdentity: "a", Capacity: 5}, fleet.HubUpdate{Capacity: num(0)}, true},
		{"capacity too large", agentHub, fleet.HubUpdate{Capacity: num(1_000_001)}, false},
		{"new identity", agentHub, fleet.HubUpdate{AgentIdentity: str("b")}, true},
		{"agent hub loses its identity", agentHub, fleet.HubUpdate{AgentIdentity: str("")}, false},
		{"agent hub to syncset, identity dropped", agentHub, fleet.HubUpdate{DeliveryMode: mode(fleet.DeliverySyncSetHive), AgentIdentity: str(""),
			Hive: hive, Credentials: creds(map[string]string{"kubeconfig": "k"})}, true},
		{"agent hub to syncset without target", agentHub, fleet.HubUpdate{DeliveryMode: mode(fleet.DeliverySyncSetHive),
			Credentials: creds(map[string]string{"kubeconfig": "k"})}, false},
		{"agent hub to syncset without credentials", agentHub, fleet.HubUpdate{DeliveryMode: mode(fleet.DeliverySyncSetHive), Hive: hive}, false},
		{"ocm hub to hive, wrong credentials", syncHub, fleet.HubUpdate{DeliveryMode: mode(fleet.DeliverySyncSetHive), Hive: hive,
			Credentials: creds(map[string]string{"offline_token": "t"})}, false},
		{"syncset hub loses its credentials", syncHub, fleet.HubUpdate{Credentials: creds(map[string]string{})}, false},
		{"agent hub drops its credentials", agentHub, fleet.HubUpdate{Credentials: creds(map[string]string{})}, true},
		{"syncset hub, bad new target", syncHub, fleet.HubUpdate{OCM: &fleet.OCMTarget{ClusterID: "c1", APIURL: "ftp://x"}}, false},
		{"syncset hub to agent without identity", func() fleet.Hub { h := syncHub; h.PlacedCount = 0; return h }(), fleet.HubUpdate{DeliveryMode: mode(fleet.DeliveryAgent)}, false},
		{"empty syncset-ocm hub to agent", func() fleet.Hub { h := syncHub; h.PlacedCount = 0; return h }(),
			fleet.HubUpdate{DeliveryMode: mode(fleet.DeliveryAgent), AgentIdentity: str("s")}, true},
		{"syncset-hive hub with placements to agent", func() fleet.Hub {
			h := syncHub
			h.DeliveryMode, h.OCM, h.Hive = fleet.DeliverySyncSetHive, nil, hive
			return h
		}(), fleet.HubUpdate{DeliveryMode: mode(fleet.DeliveryAgent), AgentIdentity: str("s")}, true},
		{"syncset hub keeps no identity", syncHub, fleet.HubUpdate{Capacity: num(20)}, true},
		{"unknown mode", syncHub, fleet.HubUpdate{DeliveryMode: mode("carrier-pigeon")}, false},
		{"owner org", syncHub, fleet.HubUpdate{OwnerOrgID: str("org-1")}, true},
		{"credentials", syncHub, fleet.HubUpdate{Credentials: &map[string]string{"offline_token": "t"}}, true},
		{"credentials of the wrong mode", syncHub, fleet.HubUpdate{Credentials: &map[string]string{"kubeconfig": "k"}}, false},
	}
	for _, tc := range tests {
		checkValid(t, tc.name, fmt.Sprintf("HubUpdate.Validate(%s: mode %s, capacity %d, placed %d)",
			tc.current.Name, tc.current.DeliveryMode, tc.current.Capacity, tc.current.PlacedCount), tc.u.Validate(tc.current), tc.valid)
	}
}

// TestSyncSetOCMHubKeepsItsModeWhilePlaced: OCM cannot let go of a SyncSet
// without removing its objects, so a syncset-ocm hub with placements cannot
// move to another mode (ADR 0008).
func TestSyncSetOCMHubKeepsItsModeWhilePlaced(t *testing.T) {
	t.Parallel()
	hub := fleet.Hub{Name: "hub-s", DeliveryMode: fleet.DeliverySyncSetOCM, Capacity: 10, PlacedCount: 1, HasCredentials: true,
		OCM: &fleet.OCMTarget{ClusterID: "c1", APIURL: "https://api.openshift.com"}}
	agent, identity := fleet.DeliveryAgent, "hub-s-agent"
	err := fleet.HubUpdate{DeliveryMode: &agent, AgentIdentity: &identity}.Validate(hub)
	if fleet.ErrorCodeOf(err) != fleet.CodeHubInUse {
		t.Errorf("moving a syncset-ocm hub with a placement to agent = %v, want code %d", err, fleet.CodeHubInUse)
	}
	hub.PlacedCount = 0
	if err := (fleet.HubUpdate{DeliveryMode: &agent, AgentIdentity: &identity}).Validate(hub); err != nil {
		t.Errorf("moving an empty syncset-ocm hub to agent = %v, want nil", err)
	}
}

// TestLabelErrorsNameNoValue: a registration's and a policy's labels are
// refused by the rule, never by repeating what was sent.
func TestLabelErrorsNameNoValue(t *testing.T) {
	t.Parallel()
	for _, labels := range []map[string]string{
		{"env": "s3cr3t value"},
		{"s3cr3t key": "x"},
		{"S3CR3T_prefix/x": "y"},
	} {
		err := fleet.ValidateLabels(labels)
		if err == nil || strings.Contains(strings.ToLower(err.Error()), "s3cr3t") {
			t.Errorf("ValidateLabels(%q) = %v, want an error that repeats no key or value at fault", labels, err)
		}
	}
	create := fleet.RegistrationCreate{Name: "S3CR3T_name", Zone: "S3CR3T zone", Product: fleet.ProductOCP}
	if err := create.Validate(); err == nil || strings.Contains(strings.ToLower(err.Error()), "s3cr3t") {
		t.Errorf("RegistrationCreate{Name: bad}.Validate() = %v, want an error that repeats no value", err)
	}
	create.Name = "ok"
	if err := create.Validate(); err == nil || strings.Contains(strings.ToLower(err.Error()), "s3cr3t") {
		t.Errorf("RegistrationCreate{Zone: bad}.Validate() = %v, want an error that repeats no value", err)
	}
	sel := fleet.LabelSelector{MatchLabels: map[string]string{"env": "s3cr3t value"}}
	if err := sel.Validate(); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("LabelSelector{env: bad}.Validate() = %v, want an error that repeats no value", err)
	}
}
