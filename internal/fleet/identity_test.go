package fleet_test

import (
	"context"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestIdentityContext(t *testing.T) {
	t.Parallel()
	if _, ok := fleet.IdentityFromContext(context.Background()); ok {
		t.Errorf("IdentityFromContext(empty) found an identity")
	}
	id := fleet.Identity{OrgID: "o", Username: "u", Roles: []string{"fleet-admin"}}
	got, ok := fleet.IdentityFromContext(fleet.NewContextWithIdentity(context.Background(), id))
	if !ok || got.OrgID != "o" || !got.HasRole("fleet-admin") || got.HasRole("viewer") {
		t.Errorf("IdentityFromContext(NewContextWithIdentity(%+v)) = %+v, %v", id, got, ok)
	}
}
