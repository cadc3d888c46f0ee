package keyrotation_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/keyrotation"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// storedSecret is one sealed column value as the table holds it.
type storedSecret struct {
	Table string
	ID    string
	KeyID *string
	Data  []byte
}

// aad is where the value is bound.
func (s storedSecret) aad() string { return s.Table + ".credentials:" + s.ID }

// storedSecrets reads every row of hubs and registrations, deleted or not.
func storedSecrets(t *testing.T, db *postgres.DB) []storedSecret {
	t.Helper()
	var out []storedSecret
	err := db.Gorm.Raw(`SELECT 'hubs' AS table, id, credentials_key_id AS key_id, credentials AS data FROM hubs
UNION ALL SELECT 'registrations', id, credentials_key_id, credentials FROM registrations ORDER BY 1, 2`).Scan(&out).Error
	if err != nil {
		t.Fatalf("reading sealed columns: %v", err)
	}
	return out
}

// TestUnknownMasterKeys tests postgres.Store.UnknownMasterKeys here, beside
// the rotation that ends a key's need, with the same sealed rows: values
// sealed under key A are unknown to a keyring of another key B alone, and
// known to A's keyring and to B's with A as an old key; an empty database
// has no unknown key.
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

// secretOf extracts the test's secret from a plaintext credentials document.
func secretOf(table string, plain []byte) (string, error) {
	if table == "hubs" {
		var m map[string]string
		err := json.Unmarshal(plain, &m)
		return m["token"], err
	}
	var ic fleet.ImportCredentials
	err := json.Unmarshal(plain, &ic)
	return ic.Kubeconfig, err
}

func TestRewrapSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	a, b := masterKey(t), masterKey(t)
	want := sealUnderA(t, db, a)
	ringA, ringB := mustKeyring(t, a), mustKeyring(t, b, a)

	// Without the old key the values cannot be re-wrapped, and none is touched.
	onlyB := mustKeyring(t, b)
	if n, err := keyrotation.New(db, onlyB).RewrapSecrets(ctx, 2); !errors.Is(err, secrets.ErrUnknownKey) || n != 0 {
		t.Errorf("RewrapSecrets(2) without key A = %d, %v; want 0 and ErrUnknownKey", n, err)
	}

	rotator := keyrotation.New(db, ringB)
	n, err := rotator.RewrapSecrets(ctx, 2)
	if err != nil || n != len(want) {
		t.Fatalf("RewrapSecrets(2) = %d, %v; want %d (every sealed row, over several batches)", n, err, len(want))
	}
	opened := 0
	for _, s := range storedSecrets(t, db) {
		secret, sealed := want[s.aad()]
		if !sealed {
			if s.KeyID != nil || s.Data != nil {
				t.Errorf("%s: key id %v, %d bytes; want no value (none was stored)", s.aad(), s.KeyID, len(s.Data))
			}
			continue
		}
		if s.KeyID == nil || *s.KeyID != onlyB.PrimaryKeyID() {
			t.Errorf("%s: key id %v after RewrapSecrets, want %s", s.aad(), s.KeyID, onlyB.PrimaryKeyID())
			continue
		}
		plain, err := onlyB.Open(secrets.Sealed{KeyID: *s.KeyID, Data: s.Data}, s.aad())
		if err != nil {
			t.Errorf("Open(%s) with key B only = %v", s.aad(), err)
			continue
		}
		if got, err := secretOf(s.Table, plain); err != nil || got != secret {
			t.Errorf("Open(%s) = %q, %v; want %q", s.aad(), got, err, secret)
		}
		if _, err := ringA.Open(secrets.Sealed{KeyID: *s.KeyID, Data: s.Data}, s.aad()); !errors.Is(err, secrets.ErrUnknownKey) {
			t.Errorf("Open(%s) with key A only = %v, want ErrUnknownKey", s.aad(), err)
		}
		opened++
	}
	if opened != len(want) {
		t.Errorf("opened %d values with key B, want %d", opened, len(want))
	}

	if n, err := rotator.RewrapSecrets(ctx, 2); err != nil || n != 0 {
		t.Errorf("RewrapSecrets(2) again = %d, %v; want 0, nil", n, err)
	}
	// Key B alone finds nothing left under another key.
	if n, err := keyrotation.New(db, onlyB).RewrapSecrets(ctx, 1); err != nil || n != 0 {
		t.Errorf("RewrapSecrets(1) with key B only = %d, %v; want 0, nil", n, err)
	}
}

func TestRewrapSecretsBatchSizes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, batch := range []int{1, 3, 4, 100} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			t.Parallel()
			db, _ := pgtest.NewMigratedDatabase(t)
			a, b := masterKey(t), masterKey(t)
			want := sealUnderA(t, db, a)
			rotator := keyrotation.New(db, mustKeyring(t, b, a))
			if n, err := rotator.RewrapSecrets(ctx, batch); err != nil || n != len(want) {
				t.Errorf("RewrapSecrets(%d) = %d, %v; want %d", batch, n, err, len(want))
			}
			if n, err := rotator.RewrapSecrets(ctx, batch); err != nil || n != 0 {
				t.Errorf("RewrapSecrets(%d) again = %d, %v; want 0", batch, n, err)
			}
		})
	}
}

// TestRewrapSecretsKeepsAConcurrentWrite changes a hub's credentials while
// RewrapSecrets waits to update the row, as a replica still sealing under the
// old key would: the new value must survive, not be overwritten by the
// re-wrapped old one.
func TestRewrapSecretsKeepsAConcurrentWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := gomega.NewWithT(t)
	db, _ := pgtest.NewMigratedDatabase(t)
	a, b := masterKey(t), masterKey(t)
	ringA, ringB := mustKeyring(t, a), mustKeyring(t, b, a)
	hub, err := postgres.NewStore(db, ringA, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault()).CreateHub(ctx, fleet.HubCreate{
		Name: "hub-c", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliveryAgent, AgentIdentity: "hub-c-agent", Capacity: 1,
		Credentials: map[string]string{"token": "old token"}})
	if err != nil {
		t.Fatalf("CreateHub() = %v", err)
	}
	aad := "hubs.credentials:" + hub.ID

	writer := db.Gorm.Begin()
	defer writer.Rollback()
	if err := writer.Exec(`SELECT id FROM hubs WHERE id = ? FOR UPDATE`, hub.ID).Error; err != nil {
		t.Fatalf("locking the hub: %v", err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := keyrotation.New(db, ringB).RewrapSecrets(ctx, 10)
		done <- result{n, err}
	}()
	g.Eventually(func() int {
		return countRows(t, db, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE hubs SET credentials%'`)
	}).WithTimeout(10*time.Second).WithPolling(10*time.Millisecond).Should(gomega.Equal(1), "RewrapSecrets never waited on the locked hub")

	newer, err := ringA.Seal([]byte(`{"token":"new token"}`), aad)
	if err != nil {
		t.Fatalf("Seal() = %v", err)
	}
	if err := writer.Exec(`UPDATE hubs SET credentials = ?, credentials_key_id = ? WHERE id = ?`, newer.Data, newer.KeyID, hub.ID).Error; err != nil {
		t.Fatalf("writing new credentials: %v", err)
	}
	if err := writer.Commit().Error; err != nil {
		t.Fatalf("committing new credentials: %v", err)
	}
	var res result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(gomega.Receive(&res))
	if res.err != nil {
		t.Fatalf("RewrapSecrets(10) beside a writer = %d, %v", res.n, res.err)
	}
	plain, err := ringB.Open(sealedColumn(t, db, "hubs", hub.ID), aad)
	if got, _ := secretOf("hubs", plain); err != nil || got != "new token" {
		t.Errorf("hub credentials after RewrapSecrets beside a writer = %q, %v; want \"new token\" (the concurrent write lost)", got, err)
	}
}

func TestRewrapSecretsRefusesAnEmptyBatch(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	rotator := keyrotation.New(db, mustKeyring(t, masterKey(t)))
	for _, batch := range []int{0, -1} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		n, err := rotator.RewrapSecrets(ctx, batch)
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RewrapSecrets(%d) = %d, %v; want an error refusing the batch size at once", batch, n, err)
		}
	}
}

// TestEverySealedColumnIsRotated finds the sealed columns in the schema (a
// bytea column, or one with a <column>_key_id sibling) and compares them with
// the columns rotate-keys covers: a sealed column added without being listed
// would keep its values under a retired key.
func TestEverySealedColumnIsRotated(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.NewMigratedDatabase(t)
	var found []string
	err := db.Gorm.Raw(`SELECT DISTINCT c.table_name || '.' || c.column_name FROM information_schema.columns c
WHERE c.table_schema = 'public' AND (c.data_type = 'bytea' OR EXISTS (SELECT 1 FROM information_schema.columns k
	WHERE k.table_schema = 'public' AND k.table_name = c.table_name AND k.column_name = c.column_name || '_key_id'))
ORDER BY 1`).Scan(&found).Error
	if err != nil {
		t.Fatal(err)
	}
	listed := sealedColumnNames()
	slices.Sort(listed)
	if !slices.Equal(found, listed) {
		t.Errorf("sealed columns in the schema = %v; rotate-keys covers %v", found, listed)
	}
}

// sealedValue is one stored value of a sealed column.
type sealedValue struct {
	AAD   string
	KeyID string
	Data  []byte
}

// sealedValues reads every value of every sealed column rotate-keys covers
// (TestEverySealedColumnIsRotated holds that list to the schema), by aad.
func sealedValues(t *testing.T, db *postgres.DB) map[string]sealedValue {
	t.Helper()
	out := map[string]sealedValue{}
	for _, tc := range sealedColumnNames() {
		table, column, _ := strings.Cut(tc, ".")
		var rows []sealedValue
		err := db.Gorm.Raw(fmt.Sprintf(`SELECT '%[1]s.%[2]s:' || id AS aad, %[2]s_key_id AS key_id, %[2]s AS data FROM %[1]s WHERE %[2]s IS NOT NULL`,
			table, column)).Scan(&rows).Error
		if err != nil {
			t.Fatalf("reading %s: %v", tc, err)
		}
		for _, r := range rows {
			out[r.AAD] = r
		}
	}
	return out
}

// sealEverywhere is sealUnderA plus the import manifests of two
// registrations, one with import credentials and one without, as their hub's
// agent reports them. It returns the secret in each sealed value by aad, and
// the org and id of a registration with import manifests.
func sealEverywhere(t *testing.T, db *postgres.DB, a []byte) (want map[string]string, org, id string) {
	t.Helper()
	ctx := context.Background()
	want = sealUnderA(t, db, a)
	store := postgres.NewStore(db, mustKeyring(t, a), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	var hubID string
	var regs []string
	if err := db.Gorm.Raw(`SELECT id FROM hubs WHERE name = 'hub-0'`).Scan(&hubID).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Raw(`UPDATE registrations SET hub_id = ? WHERE name IN ('c-0', 'c-4') RETURNING id`, hubID).Scan(&regs).Error; err != nil || len(regs) != 2 {
		t.Fatalf("placing c-0 and c-4 on hub-0: %v, %v", regs, err)
	}
	var items []fleet.RegistrationHubStatus
	for _, id := range regs {
		manifests := "kind: Namespace # import manifests of " + id
		items = append(items, fleet.RegistrationHubStatus{RegistrationID: id, ImportManifests: &manifests})
		want["registrations.import_material:"+id] = manifests
	}
	if n, err := store.RecordRegistrationStatus(ctx, hubID, "hub-0-agent", items); err != nil || n != 2 {
		t.Fatalf("RecordRegistrationStatus() = %d, %v; want 2", n, err)
	}
	return want, "org-r", regs[0]
}

// checkOpenWithOnly opens every sealed value with keyring only (its
// primary key, nothing else) and compares the secrets with want.
func checkOpenWithOnly(t *testing.T, db *postgres.DB, only *secrets.Keyring, want map[string]string) map[string]sealedValue {
	t.Helper()
	values := sealedValues(t, db)
	if len(values) != len(want) {
		t.Errorf("%d sealed values stored, want %d", len(values), len(want))
	}
	for where, secret := range want {
		v, ok := values[where]
		if !ok {
			t.Errorf("%s: no value stored", where)
			continue
		}
		plain, err := only.Open(secrets.Sealed{KeyID: v.KeyID, Data: v.Data}, where)
		if err != nil || !strings.Contains(string(plain), secret) {
			t.Errorf("Open(%s) with the new key only = %q, %v; want it to hold %q", where, plain, err, secret)
		}
	}
	return values
}

// swapValue returns now with the value part (after the version byte and the
// wrapped data key, secrets package doc) of then: what the data key of then
// opens if the value was not re-encrypted.
func swapValue(then, now sealedValue) secrets.Sealed {
	const header = 1 + 12 + 32 + 16
	return secrets.Sealed{KeyID: then.KeyID, Data: append(append([]byte{}, then.Data[:header]...), now.Data[header:]...)}
}

// TestRotationOpensEverySealedColumn rotates to a new key and retires the old
// one: every sealed value opens, the import manifests' read among them.
// Re-wrapping keeps each value's data key, so the old key with an old copy
// of the row still opens the value stored now.
func TestRotationOpensEverySealedColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	a, b := masterKey(t), masterKey(t)
	ringA, onlyB := mustKeyring(t, a), mustKeyring(t, b)
	want, org, id := sealEverywhere(t, db, a)
	before := sealedValues(t, db)
	if n, err := keyrotation.New(db, mustKeyring(t, b, a)).RewrapSecrets(ctx, 2); err != nil || n != len(want) {
		t.Fatalf("RewrapSecrets(2) = %d, %v; want %d", n, err, len(want))
	}
	after := checkOpenWithOnly(t, db, onlyB, want)
	retired := postgres.NewStore(db, onlyB, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	if m, err := retired.FindImportMaterial(ctx, fleet.Permitted, org, id); err != nil || m != want["registrations.import_material:"+id] {
		t.Errorf("FindImportMaterial() with the old key retired = %q, %v; want the manifests", m, err)
	}
	for where, v := range after {
		if _, err := ringA.Open(secrets.Sealed{KeyID: v.KeyID, Data: v.Data}, where); !errors.Is(err, secrets.ErrUnknownKey) {
			t.Errorf("Open(%s) with the old key = %v, want ErrUnknownKey", where, err)
		}
		if _, err := ringA.Open(swapValue(before[where], v), where); err != nil {
			t.Errorf("Open(%s) with the old key and data key, after a re-wrap = %v; want it to open (the value is not re-encrypted)", where, err)
		}
	}
}

// TestReencryptSecrets re-encrypts every sealed value under the new key: each
// opens with the new key alone, and neither the old key nor the old data
// keys open what is stored.
func TestReencryptSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	a, b := masterKey(t), masterKey(t)
	ringA, onlyB := mustKeyring(t, a), mustKeyring(t, b)
	want, org, id := sealEverywhere(t, db, a)
	before := sealedValues(t, db)

	if n, err := keyrotation.New(db, onlyB).ReencryptSecrets(ctx, 2); !errors.Is(err, secrets.ErrUnknownKey) || n != 0 {
		t.Errorf("ReencryptSecrets(2) without the old key = %d, %v; want 0 and ErrUnknownKey", n, err)
	}
	if got := sealedValues(t, db); !maps.EqualFunc(got, before, func(x, y sealedValue) bool { return x.KeyID == y.KeyID && bytes.Equal(x.Data, y.Data) }) {
		t.Errorf("a failed ReencryptSecrets changed stored values")
	}
	rotator := keyrotation.New(db, mustKeyring(t, b, a))
	if n, err := rotator.ReencryptSecrets(ctx, 2); err != nil || n != len(want) {
		t.Fatalf("ReencryptSecrets(2) = %d, %v; want %d (every sealed value, over several batches)", n, err, len(want))
	}
	after := checkOpenWithOnly(t, db, onlyB, want)
	retired := postgres.NewStore(db, onlyB, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	if m, err := retired.FindImportMaterial(ctx, fleet.Permitted, org, id); err != nil || m != want["registrations.import_material:"+id] {
		t.Errorf("FindImportMaterial() after re-encryption, the old key retired = %q, %v; want the manifests", m, err)
	}
	for where, v := range after {
		if _, err := ringA.Open(swapValue(before[where], v), where); !errors.Is(err, secrets.ErrDecrypt) {
			t.Errorf("Open(%s) with the old key and data key, after re-encryption = %v; want ErrDecrypt", where, err)
		}
	}
	if n, err := rotator.ReencryptSecrets(ctx, 2); err != nil || n != 0 {
		t.Errorf("ReencryptSecrets(2) again = %d, %v; want 0", n, err)
	}
	if n, err := keyrotation.New(db, onlyB).RewrapSecrets(ctx, 2); err != nil || n != 0 {
		t.Errorf("RewrapSecrets(2) with the new key only after re-encryption = %d, %v; want 0", n, err)
	}
}

// sealedColumnNames returns the sealed columns rotate-keys covers, as
// "table.column".
func sealedColumnNames() []string {
	var out []string
	for _, c := range postgres.SealedColumns() {
		out = append(out, c.Table+"."+c.Column)
	}
	return out
}

// masterKey returns a fresh random 32-byte master key.
func masterKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatalf("rand.Read() = %v", err)
	}
	return key
}

// mustKeyring returns the keyring of primary and old, failing t on error.
func mustKeyring(t *testing.T, primary []byte, old ...[]byte) *secrets.Keyring {
	t.Helper()
	k, err := secrets.NewKeyring(primary, old...)
	if err != nil {
		t.Fatalf("NewKeyring() = %v", err)
	}
	return k
}

// countRows runs a count query, failing t on error.
func countRows(t *testing.T, db *postgres.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Gorm.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

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
