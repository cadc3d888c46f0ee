package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestStoreConfigValidatePoolCloudSettings: what the installer needs on GCP
// and Azure is checked at start against the clouds' own naming rules.
func TestStoreConfigValidatePoolCloudSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		flag string // "" when valid
	}{
		{nil, ""},
		{[]string{"--pool-gcp-project-id=fleet-pools-1", "--pool-azure-base-domain-resource-group=dns_rg.(eu)-1"}, ""},
		{[]string{"--pool-gcp-project-id=1fleet"}, "pool-gcp-project-id"},
		{[]string{"--pool-gcp-project-id=short"}, "pool-gcp-project-id"},
		{[]string{"--pool-gcp-project-id=fleet-pools-"}, "pool-gcp-project-id"},
		{[]string{"--pool-azure-base-domain-resource-group=dns rg"}, "pool-azure-base-domain-resource-group"},
		{[]string{"--pool-azure-base-domain-resource-group=dns-rg."}, "pool-azure-base-domain-resource-group"},
		{[]string{"--pool-arm64-instance-types=aws.large=m7g.4xlarge"}, ""},
	} {
		cfg := postgres.DefaultStoreConfig()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("Parse(%v): %v", tc.args, err)
		}
		err := cfg.Validate()
		if tc.flag == "" && err != nil {
			t.Errorf("Validate(%v) = %v, want nil", tc.args, err)
		}
		if tc.flag != "" && (err == nil || !strings.Contains(err.Error(), "--"+tc.flag)) {
			t.Errorf("Validate(%v) = %v, want an error naming --%s", tc.args, err, tc.flag)
		}
	}
	// Every arm64 size class needs an instance type, as the amd64 ones do.
	cfg := postgres.DefaultStoreConfig()
	delete(cfg.Pools.ARM64InstanceTypes[fleet.CloudGCP], fleet.SizeLarge)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--pool-arm64-instance-types: gcp.large has no instance type") {
		t.Errorf("Validate(no gcp.large arm64 type) = %v, want it named", err)
	}
}

// TestPoolOnACloudTheDeploymentCannotInstallOn: without a GCP project or an
// Azure DNS resource group the installer refuses every cluster, so a pool
// there is refused when it is made, not when its first cluster installs.
func TestPoolOnACloudTheDeploymentCannotInstallOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	cfg := postgres.DefaultStoreConfig()
	cfg.Pools.GCPProjectID = "fleet-pools-1"
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, cfg, quotaAuthorizer(t, 0))
	alice := fleet.Identity{OrgID: "org-a", Username: "alice"}
	bp, err := store.CreateBlueprint(ctx, alice, "bp", poolBlueprint("4.16.3"))
	if err != nil {
		t.Fatalf("CreateBlueprint: %v", err)
	}
	create := func(cloud fleet.Cloud) error {
		_, err := store.CreatePool(ctx, alice, fleet.PoolCreate{Name: "on-" + string(cloud), BlueprintID: bp.ID, BlueprintVersion: 1,
			Cloud: cloud, Region: "r1", Zone: "eu", MinClusters: 0, MaxClusters: 1, UnitsPerCluster: 10, Credentials: poolCredentials()})
		return err
	}
	if err := create(fleet.CloudAzure); fleet.ErrorCodeOf(err) != fleet.CodeValidation || !strings.Contains(err.Error(), "azure") {
		t.Errorf("CreatePool(azure, no resource group) = %v, want CodeValidation naming azure", err)
	}
	if err := create(fleet.CloudGCP); err != nil {
		t.Errorf("CreatePool(gcp, with a project) = %v, want nil", err)
	}
}
