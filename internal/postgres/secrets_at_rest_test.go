package postgres_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// Recognizable 40-character plaintexts that must never be stored or returned.
const (
	hubTokenMarker     = "HUB-TOKEN-MARKER-0123456789abcdefghijklm"
	hubRotatedMarker   = "HUB-ROTATED-MARKER-0123456789abcdefghijk"
	kubeconfigMarker   = "KUBECONFIG-MARKER-0123456789abcdefghijkl"
	clusterTokenMarker = "CLUSTER-TOKEN-MARKER-0123456789abcdefghi"
)

// sealedColumn reads a row's sealed credentials as stored.
func sealedColumn(t *testing.T, db *postgres.DB, table, id string) secrets.Sealed {
	t.Helper()
	var row struct {
		KeyID *string
		Data  []byte
	}
	err := db.Gorm.Raw(fmt.Sprintf(`SELECT credentials_key_id AS key_id, credentials AS data FROM %s WHERE id = ?`, table), id).Scan(&row).Error
	if err != nil || row.KeyID == nil || len(row.Data) == 0 {
		t.Fatalf("reading %s.credentials of %s = %v, %+v; want sealed credentials", table, id, err, row)
	}
	return secrets.Sealed{KeyID: *row.KeyID, Data: row.Data}
}

// dumpDatabase renders every row of every table of the public schema as text,
// and every bytea column both escaped and as stored, as pg_dump would.
func dumpDatabase(t *testing.T, db *postgres.DB) string {
	t.Helper()
	var tables []string
	if err := db.Gorm.Raw(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`).Scan(&tables).Error; err != nil {
		t.Fatalf("listing tables: %v", err)
	}
	var dump strings.Builder
	for _, table := range tables {
		var rows []string
		if err := db.Gorm.Raw(fmt.Sprintf(`SELECT t::text FROM %q t`, table)).Scan(&rows).Error; err != nil {
			t.Fatalf("dumping %s: %v", table, err)
		}
		dump.WriteString(strings.Join(rows, "\n"))
		var byteaColumns []string
		err := db.Gorm.Raw(`SELECT column_name FROM information_schema.columns
WHERE table_schema = 'public' AND table_name = ? AND data_type = 'bytea'`, table).Scan(&byteaColumns).Error
		if err != nil {
			t.Fatalf("listing bytea columns of %s: %v", table, err)
		}
		for _, col := range byteaColumns {
			var values []string
			if err := db.Gorm.Raw(fmt.Sprintf(`SELECT coalesce(encode(%q, 'escape'), '') FROM %q`, col, table)).Scan(&values).Error; err != nil {
				t.Fatalf("dumping %s.%s: %v", table, col, err)
			}
			var raw [][]byte
			if err := db.Gorm.Raw(fmt.Sprintf(`SELECT %q FROM %q WHERE %[1]q IS NOT NULL`, col, table)).Scan(&raw).Error; err != nil {
				t.Fatalf("reading %s.%s: %v", table, col, err)
			}
			dump.WriteString(strings.Join(values, "\n"))
			for _, b := range raw {
				dump.Write(b)
			}
		}
	}
	return dump.String()
}

// leakedMarkers returns the markers s holds in plain text, hex or base64.
func leakedMarkers(s string, markers ...string) []string {
	var found []string
	for _, m := range markers {
		for _, form := range []string{m, hex.EncodeToString([]byte(m)), base64.StdEncoding.EncodeToString([]byte(m)), m[5:30]} {
			if strings.Contains(strings.ToLower(s), strings.ToLower(form)) {
				found = append(found, m)
				break
			}
		}
	}
	return found
}

func TestSecretsAreEncryptedAtRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	keyring := mustKeyring(t, masterKey(t))
	store := postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	markers := []string{hubTokenMarker, hubRotatedMarker, kubeconfigMarker, clusterTokenMarker}
	for _, m := range markers {
		if len(m) != 40 {
			t.Fatalf("marker %q is %d characters, want 40", m, len(m))
		}
	}

	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-s", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliverySyncSetOCM, OCM: &fleet.OCMTarget{ClusterID: "c1", APIURL: "https://api.openshift.com"},
		Capacity: 10, Credentials: map[string]string{"offline_token": hubTokenMarker}})
	if err != nil {
		t.Fatalf("CreateHub(hub-s) = %v", err)
	}
	hub2, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-r", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliverySyncSetHive, Hive: &fleet.HiveTarget{Namespace: "hive", ClusterDeployment: "hub-r"},
		Capacity: 10, Credentials: map[string]string{"kubeconfig": "to be replaced"}})
	if err != nil {
		t.Fatalf("CreateHub(hub-r) = %v", err)
	}
	rotated := map[string]string{"kubeconfig": hubRotatedMarker}
	if _, err := store.UpdateHub(ctx, hub2.ID, nil, fleet.HubUpdate{Credentials: &rotated}); err != nil {
		t.Fatalf("UpdateHub(hub-r, credentials) = %v", err)
	}
	caller := fleet.Identity{OrgID: "org-s", Username: "sam"}
	kubeconfig := "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: " + kubeconfigMarker + "\n"
	regKube, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: "kube", Zone: "eu", Product: fleet.ProductOCP,
		Credentials: &fleet.ImportCredentials{Kubeconfig: kubeconfig}}, "idem-kube")
	if err != nil {
		t.Fatalf("CreateRegistration(kube) = %v", err)
	}
	regToken, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: "token", Zone: "eu", Product: fleet.ProductOCP,
		Credentials: &fleet.ImportCredentials{APIURL: "https://api.example.com:6443", Token: clusterTokenMarker}}, "")
	if err != nil {
		t.Fatalf("CreateRegistration(token) = %v", err)
	}

	dump := dumpDatabase(t, db)
	for _, want := range []string{"hub-s", "hub-r", "kube", "idem-kube", "202611300002", `\\x01`} {
		if !strings.Contains(dump, want) {
			t.Fatalf("the database dump lacks %q: it does not cover every table", want)
		}
	}
	if leaked := leakedMarkers(dump, markers...); len(leaked) > 0 {
		t.Errorf("the database dump holds %v in clear", leaked)
	}

	var returned []string
	for _, id := range []string{hub.ID, hub2.ID} {
		h, err := store.FindHub(ctx, id)
		if err != nil || !h.HasCredentials {
			t.Errorf("FindHub(%s) = %+v, %v; want a hub with credentials", id, h, err)
		}
		returned = append(returned, fmt.Sprintf("%+v", h))
	}
	hubs, _, err := store.ListHubs(ctx, fleet.ListQuery{})
	returned = append(returned, fmt.Sprintf("%+v %v", hubs, err))
	for _, id := range []string{regKube.ID, regToken.ID} {
		r, err := store.FindRegistration(ctx, caller.OrgID, id)
		if err != nil || !r.HasCredentials {
			t.Errorf("FindRegistration(%s) = %+v, %v; want a registration with credentials", id, r, err)
		}
		returned = append(returned, fmt.Sprintf("%+v", r))
	}
	regs, _, err := store.ListRegistrations(ctx, caller.OrgID, fleet.ListQuery{})
	returned = append(returned, fmt.Sprintf("%+v %v", regs, err))
	claims, err := postgres.NewQueue(store, postgres.DefaultQueueConfig()).ClaimRegistrations(ctx, fleet.WorkProvision, "test", 10, 0)
	returned = append(returned, fmt.Sprintf("%+v %v", claims, err))
	if leaked := leakedMarkers(strings.Join(returned, "\n"), markers...); len(leaked) > 0 {
		t.Errorf("the domain values the store returns hold %v", leaked)
	}

	// The sealed values do hold the secrets: the keyring opens them in place.
	for _, tc := range []struct{ table, id, marker string }{
		{"hubs", hub.ID, hubTokenMarker}, {"hubs", hub2.ID, hubRotatedMarker},
		{"registrations", regKube.ID, kubeconfigMarker}, {"registrations", regToken.ID, clusterTokenMarker},
	} {
		aad := tc.table + ".credentials:" + tc.id
		plain, err := keyring.Open(sealedColumn(t, db, tc.table, tc.id), aad)
		if err != nil || !strings.Contains(string(plain), tc.marker) {
			t.Errorf("Open(%s) = %d bytes, %v; want the value holding %s", aad, len(plain), err, tc.marker)
		}
	}
}

func TestSealedCredentialsAreBoundToTheirRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	keyring := mustKeyring(t, masterKey(t))
	store := postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	caller := fleet.Identity{OrgID: "org-s", Username: "sam"}
	var ids []string
	for _, name := range []string{"victim", "thief"} {
		reg, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: name, Zone: "eu", Product: fleet.ProductOCP,
			Credentials: &fleet.ImportCredentials{Kubeconfig: "kubeconfig of " + name}}, "")
		if err != nil {
			t.Fatalf("CreateRegistration(%s) = %v", name, err)
		}
		ids = append(ids, reg.ID)
	}
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-s", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliverySyncSetOCM, OCM: &fleet.OCMTarget{ClusterID: "c1", APIURL: "https://api.openshift.com"},
		Capacity: 1, Credentials: map[string]string{"offline_token": "t"}})
	if err != nil {
		t.Fatalf("CreateHub() = %v", err)
	}
	victim, thief := ids[0], ids[1]

	// Copy the victim's sealed credentials onto the thief's row.
	err = db.Gorm.Exec(`UPDATE registrations t SET credentials = v.credentials, credentials_key_id = v.credentials_key_id
FROM registrations v WHERE v.id = ? AND t.id = ?`, victim, thief).Error
	if err != nil {
		t.Fatalf("copying sealed credentials: %v", err)
	}
	copied := sealedColumn(t, db, "registrations", thief)
	tests := []struct {
		name   string
		sealed secrets.Sealed
		aad    string
		opens  bool
	}{
		{"victim's value in place", sealedColumn(t, db, "registrations", victim), "registrations.credentials:" + victim, true},
		{"victim's value on the thief's row", copied, "registrations.credentials:" + thief, false},
		{"hub value read as a registration's", sealedColumn(t, db, "hubs", hub.ID), "registrations.credentials:" + hub.ID, false},
		{"registration value read as a hub's", copied, "hubs.credentials:" + victim, false},
		{"other key id", secrets.Sealed{KeyID: "0123456789abcdef", Data: copied.Data}, "registrations.credentials:" + victim, false},
	}
	for _, tc := range tests {
		plain, err := keyring.Open(tc.sealed, tc.aad)
		switch {
		case tc.opens && (err != nil || string(plain) != `{"kubeconfig":"kubeconfig of victim"}`):
			t.Errorf("%s: Open(%s) = %q, %v; want the victim's credentials", tc.name, tc.aad, plain, err)
		case !tc.opens && err == nil:
			t.Errorf("%s: Open(%s) = %q, nil; want an error", tc.name, tc.aad, plain)
		case !tc.opens && !errors.Is(err, secrets.ErrDecrypt) && !errors.Is(err, secrets.ErrUnknownKey):
			t.Errorf("%s: Open(%s) = %v; want ErrDecrypt or ErrUnknownKey", tc.name, tc.aad, err)
		}
	}
}
