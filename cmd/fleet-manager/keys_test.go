package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "master.key")
	out, _, err := execute(t, nil, "generate-key", path)
	if err != nil || out != "wrote a new master key to "+path+"\n" {
		t.Fatalf("generate-key %s = %q, %v", path, out, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("generate-key %s wrote mode %v, %v; want 0600", path, info.Mode().Perm(), err)
	}
	written, _ := os.ReadFile(path)
	if _, err := secrets.LoadKeyring(secrets.Config{KeyFile: path}); err != nil {
		t.Errorf("LoadKeyring(generated key) = %v", err)
	}

	out, _, err = execute(t, nil, "generate-key", path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("generate-key over an existing file = %q, %v; want an error naming it", out, err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(written) {
		t.Errorf("generate-key over an existing file changed it")
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if _, _, err := execute(t, nil, "generate-key", other); err != nil {
		t.Fatalf("generate-key %s = %v", other, err)
	}
	if b, _ := os.ReadFile(other); string(b) == string(written) {
		t.Errorf("two generated keys are equal")
	}
	for _, args := range [][]string{{"generate-key"}, {"generate-key", "a", "b"}} {
		if _, _, err := execute(t, nil, args...); err == nil {
			t.Errorf("%v = nil, want an argument error", args)
		}
	}
}

// sealThroughStore stores a hub's and two registrations' credentials through a
// store with keyring, and returns their aads and the plaintext secret in each.
func sealThroughStore(t *testing.T, db *postgres.DB, keyring *secrets.Keyring) map[string]string {
	t.Helper()
	ctx := context.Background()
	store := postgres.NewStore(db, keyring, fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hub-k", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliverySyncSetOCM, OCM: &fleet.OCMTarget{ClusterID: "c1", APIURL: "https://api.openshift.com"},
		Capacity: 5, Credentials: map[string]string{"offline_token": "hub-secret"}})
	if err != nil {
		t.Fatalf("CreateHub() = %v", err)
	}
	want := map[string]string{"hubs.credentials:" + hub.ID: `{"offline_token":"hub-secret"}`}
	caller := fleet.Identity{OrgID: "org-k", Username: "kim"}
	for i := range 2 {
		reg, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: fmt.Sprintf("k-%d", i), Zone: "eu",
			Product: fleet.ProductOCP, Credentials: &fleet.ImportCredentials{Kubeconfig: fmt.Sprintf("kubeconfig-%d", i)}}, "")
		if err != nil {
			t.Fatalf("CreateRegistration() = %v", err)
		}
		want["registrations.credentials:"+reg.ID] = fmt.Sprintf(`{"kubeconfig":"kubeconfig-%d"}`, i)
	}
	return want
}

// openAll opens every sealed credentials column with keyring and returns the
// plaintexts by aad.
func openAll(t *testing.T, db *postgres.DB, keyring *secrets.Keyring) map[string]string {
	t.Helper()
	var rows []struct {
		AAD   string
		KeyID string
		Data  []byte
	}
	err := db.Gorm.Raw(`SELECT 'hubs.credentials:' || id AS aad, credentials_key_id AS key_id, credentials AS data FROM hubs WHERE credentials IS NOT NULL
UNION ALL SELECT 'registrations.credentials:' || id, credentials_key_id, credentials FROM registrations WHERE credentials IS NOT NULL`).Scan(&rows).Error
	if err != nil {
		t.Fatalf("reading sealed columns: %v", err)
	}
	out := map[string]string{}
	for _, r := range rows {
		plain, err := keyring.Open(secrets.Sealed{KeyID: r.KeyID, Data: r.Data}, r.AAD)
		if err != nil {
			t.Errorf("Open(%s) = %v", r.AAD, err)
			continue
		}
		out[r.AAD] = string(plain)
	}
	return out
}

// keyFile writes a new master key and returns its path.
func keyFile(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := secrets.GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadKeyring(t *testing.T, primary string, old ...string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.LoadKeyring(secrets.Config{KeyFile: primary, OldKeyFiles: old})
	if err != nil {
		t.Fatalf("LoadKeyring(%s, %v) = %v", primary, old, err)
	}
	return k
}

func TestRotateKeys(t *testing.T) {
	t.Parallel()
	db, cfg := pgtest.NewMigratedDatabase(t)
	a, b := keyFile(t, "a.key"), keyFile(t, "b.key")
	want := sealThroughStore(t, db, loadKeyring(t, a))
	onlyB := loadKeyring(t, b)

	// Without the old key nothing can be re-wrapped.
	_, _, err := execute(t, nil, append([]string{"rotate-keys", "--encryption-key-file=" + b}, dbFlags(cfg)...)...)
	if !errors.Is(err, secrets.ErrUnknownKey) {
		t.Errorf("rotate-keys without the old key = %v, want ErrUnknownKey", err)
	}

	args := append([]string{"rotate-keys", "--encryption-key-file=" + b, "--encryption-old-key-files=" + a, "--batch-size=2"}, dbFlags(cfg)...)
	out, _, err := execute(t, nil, args...)
	if wantOut := fmt.Sprintf("re-wrapped %d secrets under key %s\n", len(want), onlyB.PrimaryKeyID()); err != nil || out != wantOut {
		t.Fatalf("rotate-keys = %q, %v; want %q", out, err, wantOut)
	}
	if got := openAll(t, db, onlyB); len(got) != len(want) {
		t.Errorf("opened %d values with key B only, want %d", len(got), len(want))
	} else {
		for aad, plain := range want {
			if got[aad] != plain {
				t.Errorf("Open(%s) with key B only = %q, want %q", aad, got[aad], plain)
			}
		}
	}
	out, _, err = execute(t, nil, args...)
	if err != nil || !strings.HasPrefix(out, "re-wrapped 0 secrets") {
		t.Errorf("rotate-keys again = %q, %v; want re-wrapped 0 secrets", out, err)
	}
	// The old key is no longer needed.
	out, _, err = execute(t, nil, append([]string{"rotate-keys", "--encryption-key-file=" + b}, dbFlags(cfg)...)...)
	if err != nil || !strings.HasPrefix(out, "re-wrapped 0 secrets") {
		t.Errorf("rotate-keys with key B only = %q, %v; want re-wrapped 0 secrets", out, err)
	}
}

func TestRotateKeysValidatesItsFlags(t *testing.T) {
	t.Parallel()
	_, cfg := pgtest.NewMigratedDatabase(t)
	key := keyFile(t, "k.key")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no key file", nil, "encryption-key-file"},
		{"key file missing", []string{"--encryption-key-file=" + filepath.Join(t.TempDir(), "none")}, "none"},
		{"old key is the current one", []string{"--encryption-key-file=" + key, "--encryption-old-key-files=" + key}, "encryption-old-key-files"},
		{"batch size 0", []string{"--encryption-key-file=" + key, "--batch-size=0"}, "batch-size"},
		{"negative batch size", []string{"--encryption-key-file=" + key, "--batch-size=-1"}, "batch-size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errOut logtest.Buffer
			cmd := newRootCommand(&out, &errOut, mapEnv(nil))
			cmd.SetArgs(append(append([]string{"rotate-keys"}, tc.args...), dbFlags(cfg)...))
			err := cmd.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rotate-keys %v = %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
}

// TestRotateKeysReencrypt re-encrypts instead of re-wrapping: every value
// opens with the new key alone, and each value's own ciphertext changed
// (a fresh data key), not only its wrapped data key.
func TestRotateKeysReencrypt(t *testing.T) {
	t.Parallel()
	db, cfg := pgtest.NewMigratedDatabase(t)
	a, b := keyFile(t, "a.key"), keyFile(t, "b.key")
	want := sealThroughStore(t, db, loadKeyring(t, a))
	onlyB := loadKeyring(t, b)
	valuesOf := func() map[string]string {
		var rows []struct{ AAD, Value string }
		// The value part follows the version byte and the wrapped data key.
		err := db.Gorm.Raw(`SELECT 'hubs.credentials:' || id AS aad, encode(substr(credentials, 62), 'hex') AS value FROM hubs WHERE credentials IS NOT NULL
UNION ALL SELECT 'registrations.credentials:' || id, encode(substr(credentials, 62), 'hex') FROM registrations WHERE credentials IS NOT NULL`).Scan(&rows).Error
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range rows {
			out[r.AAD] = r.Value
		}
		return out
	}
	before := valuesOf()

	args := append([]string{"rotate-keys", "--reencrypt", "--encryption-key-file=" + b, "--encryption-old-key-files=" + a, "--batch-size=2"}, dbFlags(cfg)...)
	out, _, err := execute(t, nil, args...)
	if wantOut := fmt.Sprintf("re-encrypted %d secrets under key %s\n", len(want), onlyB.PrimaryKeyID()); err != nil || out != wantOut {
		t.Fatalf("rotate-keys --reencrypt = %q, %v; want %q", out, err, wantOut)
	}
	got := openAll(t, db, onlyB)
	for aad, plain := range want {
		if got[aad] != plain {
			t.Errorf("Open(%s) with key B only = %q, want %q", aad, got[aad], plain)
		}
	}
	after := valuesOf()
	for aad, v := range before {
		if after[aad] == v {
			t.Errorf("%s: the value's ciphertext is unchanged after rotate-keys --reencrypt", aad)
		}
	}
	out, _, err = execute(t, nil, args...)
	if err != nil || !strings.HasPrefix(out, "re-encrypted 0 secrets") {
		t.Errorf("rotate-keys --reencrypt again = %q, %v; want re-encrypted 0 secrets", out, err)
	}
}
