package postgres_test

import (
	"context"
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
