package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestUnknownMasterKeys: values sealed under key A are unknown to a keyring
// of another key B alone, and known to A's keyring and to B's with A as an
// old key; an empty database has no unknown key.
func TestUnknownMasterKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := masterKey(t), masterKey(t)
	storeOf := func(db *postgres.DB, primary []byte, old ...[]byte) *postgres.Store {
		return postgres.NewStore(db, mustKeyring(t, primary, old...), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	}
	empty, _ := pgtest.NewMigratedDatabase(t)
	if got, err := storeOf(empty, b).UnknownMasterKeys(ctx); err != nil || len(got) != 0 {
		t.Errorf("UnknownMasterKeys() on an empty database = %v, %v; want none", got, err)
	}

	db, _ := pgtest.NewMigratedDatabase(t)
	sealUnderA(t, db, a)
	idA := mustKeyring(t, a).PrimaryKeyID()
	for _, tc := range []struct {
		name string
		s    *postgres.Store
		want []string
	}{
		{"another key", storeOf(db, b), []string{idA}},
		{"the key", storeOf(db, a), nil},
		{"another key with the key as an old one", storeOf(db, b, a), nil},
	} {
		got, err := tc.s.UnknownMasterKeys(ctx)
		if err != nil || !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
			t.Errorf("%s: UnknownMasterKeys() = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// sealUnderA stores secrets through a store whose keyring holds only key a:
// 3 hubs with credentials (one of them deleted), 4 registrations with
// credentials, and a hub and a registration without. It returns the
// plaintext secret of every sealed row by aad.
func sealUnderA(t *testing.T, db *postgres.DB, a []byte) map[string]string {
	t.Helper()
	ctx := context.Background()
	store := postgres.NewStore(db, mustKeyring(t, a), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	want := map[string]string{}
	for i := range 4 {
		create := fleet.HubCreate{Name: fmt.Sprintf("hub-%d", i), Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent,
			AgentIdentity: fmt.Sprintf("hub-%d-agent", i), Capacity: 5}
		if i < 3 {
			create.Credentials = map[string]string{"token": fmt.Sprintf("hub token %d", i)}
		}
		hub, err := store.CreateHub(ctx, create)
		if err != nil {
			t.Fatalf("CreateHub(%s) = %v", create.Name, err)
		}
		if i < 3 {
			want["hubs.credentials:"+hub.ID] = create.Credentials["token"]
		}
		if i == 2 {
			if err := store.DeleteHub(ctx, hub.ID); err != nil {
				t.Fatalf("DeleteHub(%s) = %v", hub.Name, err)
			}
		}
	}
	caller := fleet.Identity{OrgID: "org-r", Username: "rita"}
	for i := range 5 {
		create := fleet.RegistrationCreate{Name: fmt.Sprintf("c-%d", i), Zone: "eu", Product: fleet.ProductOCP}
		if i < 4 {
			create.Credentials = &fleet.ImportCredentials{Kubeconfig: fmt.Sprintf("kubeconfig %d", i)}
		}
		reg, _, err := store.CreateRegistration(ctx, caller, create, "")
		if err != nil {
			t.Fatalf("CreateRegistration(%s) = %v", create.Name, err)
		}
		if i < 4 {
			want["registrations.credentials:"+reg.ID] = create.Credentials.Kubeconfig
		}
	}
	return want
}
