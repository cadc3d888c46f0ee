package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
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

// sealUnderA stores secrets through a store whose keyring holds only key a:
// 3 hubs with credentials (one of them deleted), 4 registrations with
// credentials, and a hub and a registration without. It returns the
// plaintext secret of every sealed row by aad.
func sealUnderA(t *testing.T, db *postgres.DB, a []byte) map[string]string {
	t.Helper()
	ctx := context.Background()
	store := postgres.NewStore(db, mustKeyring(t, a), fleet.SystemClock{}, postgres.DefaultStoreConfig())
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
	storeOnlyB := postgres.NewStore(db, onlyB, fleet.SystemClock{}, postgres.DefaultStoreConfig())
	if n, err := storeOnlyB.RewrapSecrets(ctx, 2); !errors.Is(err, secrets.ErrUnknownKey) || n != 0 {
		t.Errorf("RewrapSecrets(2) without key A = %d, %v; want 0 and ErrUnknownKey", n, err)
	}

	store := postgres.NewStore(db, ringB, fleet.SystemClock{}, postgres.DefaultStoreConfig())
	n, err := store.RewrapSecrets(ctx, 2)
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

	if n, err := store.RewrapSecrets(ctx, 2); err != nil || n != 0 {
		t.Errorf("RewrapSecrets(2) again = %d, %v; want 0, nil", n, err)
	}
	// The store reads what it re-wrapped.
	if n, err := postgres.NewStore(db, onlyB, fleet.SystemClock{}, postgres.DefaultStoreConfig()).RewrapSecrets(ctx, 1); err != nil || n != 0 {
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
			store := postgres.NewStore(db, mustKeyring(t, b, a), fleet.SystemClock{}, postgres.DefaultStoreConfig())
			if n, err := store.RewrapSecrets(ctx, batch); err != nil || n != len(want) {
				t.Errorf("RewrapSecrets(%d) = %d, %v; want %d", batch, n, err, len(want))
			}
			if n, err := store.RewrapSecrets(ctx, batch); err != nil || n != 0 {
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
	hub, err := postgres.NewStore(db, ringA, fleet.SystemClock{}, postgres.DefaultStoreConfig()).CreateHub(ctx, fleet.HubCreate{
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
		n, err := postgres.NewStore(db, ringB, fleet.SystemClock{}, postgres.DefaultStoreConfig()).RewrapSecrets(ctx, 10)
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
	store := postgres.NewStore(db, mustKeyring(t, masterKey(t)), fleet.SystemClock{}, postgres.DefaultStoreConfig())
	for _, batch := range []int{0, -1} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		n, err := store.RewrapSecrets(ctx, batch)
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RewrapSecrets(%d) = %d, %v; want an error refusing the batch size at once", batch, n, err)
		}
	}
}
