package secrets_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// writeFile writes content to a new file of a temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("WriteFile(%s) = %v", path, err)
	}
	return path
}

// wantKeyID is the documented key id: the first 16 hex characters of SHA-256.
func wantKeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])[:16]
}

func TestNewKeyring(t *testing.T) {
	t.Parallel()
	key, old := newKey(t), newKey(t)
	tests := []struct {
		name    string
		primary []byte
		old     [][]byte
		wantErr string
	}{
		{"primary only", key, nil, ""},
		{"with old keys", key, [][]byte{old, old, key}, ""},
		{"short primary", key[:16], nil, "NewKeyring(primary): key is 16 bytes, want 32"},
		{"long old key", key, [][]byte{old, append(old, 0)}, "NewKeyring(old key 2): key is 33 bytes, want 32"},
		{"no primary", nil, nil, "NewKeyring(primary): key is 0 bytes, want 32"},
	}
	for _, tt := range tests {
		k, err := secrets.NewKeyring(tt.primary, tt.old...)
		switch {
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("NewKeyring(%s) = %v, want error %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("NewKeyring(%s) = %v, want no error", tt.name, err)
		case tt.wantErr == "" && k.PrimaryKeyID() != wantKeyID(key):
			t.Errorf("NewKeyring(%s).PrimaryKeyID() = %q, want %q", tt.name, k.PrimaryKeyID(), wantKeyID(key))
		}
	}
}

func TestLoadKeyring(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	b64, hx := base64.StdEncoding.EncodeToString(key), hex.EncodeToString(key)
	tests := []struct {
		name    string
		content string
	}{
		{"base64", b64},
		{"hex", hx},
		{"upper-case hex", strings.ToUpper(hx)},
		{"base64 with trailing newline", b64 + "\n"},
		{"hex with CRLF", hx + "\r\n"},
		{"surrounding white space", " \t" + b64 + "\n\n"},
	}
	for _, tt := range tests {
		path := writeFile(t, "key", tt.content)
		k, err := secrets.LoadKeyring(secrets.Config{KeyFile: path})
		if err != nil {
			t.Errorf("LoadKeyring(%s) = %v, want no error", tt.name, err)
			continue
		}
		if got := k.PrimaryKeyID(); got != wantKeyID(key) {
			t.Errorf("LoadKeyring(%s).PrimaryKeyID() = %q, want %q", tt.name, got, wantKeyID(key))
		}
	}
}

func TestLoadKeyringOldKeys(t *testing.T) {
	t.Parallel()
	oldKey := newKey(t)
	s := seal(t, newKeyring(t, oldKey), []byte(marker), "aad")
	cfg := secrets.Config{
		KeyFile:     writeFile(t, "new", base64.StdEncoding.EncodeToString(newKey(t))),
		OldKeyFiles: []string{writeFile(t, "old", hex.EncodeToString(oldKey)+"\n")},
	}
	k, err := secrets.LoadKeyring(cfg)
	if err != nil {
		t.Fatalf("LoadKeyring(%+v) = %v", cfg, err)
	}
	if got, err := k.Open(s, "aad"); err != nil || string(got) != marker {
		t.Errorf("Open(sealed under old key) = %q, %v; want marker", got, err)
	}
}

func TestLoadKeyringRefuses(t *testing.T) {
	t.Parallel()
	short := newKey(t)[:16]
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"16-byte key in base64", base64.StdEncoding.EncodeToString(short), "16-byte key"},
		{"16-byte key in hex", hex.EncodeToString(short), "16-byte key"},
		{"garbage", "not-a-key: SUPERSECRETPASSWORD", "neither base64 nor hex"},
		{"64 letters, valid base64 only", strings.Repeat("g", 64), "48-byte key"},
		{"almost hex", strings.Repeat("ab", 31) + "-!", "neither base64 nor hex"},
		{"empty", " \n", "empty"},
	}
	for _, tt := range tests {
		path := writeFile(t, "key", tt.content)
		_, err := secrets.LoadKeyring(secrets.Config{KeyFile: path})
		switch {
		case err == nil:
			t.Errorf("LoadKeyring(%s) = nil, want an error", tt.name)
		case !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want):
			t.Errorf("LoadKeyring(%s) = %q, want it to name %s and say %q", tt.name, err, path, tt.want)
		case strings.TrimSpace(tt.content) != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.content)):
			t.Errorf("LoadKeyring(%s) = %q, want no file content in it", tt.name, err)
		case strings.Contains(err.Error(), "SUPERSECRET") || strings.Contains(err.Error(), "'-'"):
			t.Errorf("LoadKeyring(%s) = %q, want no file content in it", tt.name, err)
		}
	}
}

func TestLoadKeyringMissingFiles(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "key", base64.StdEncoding.EncodeToString(newKey(t)))
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		cfg  secrets.Config
		want string
	}{
		{"no key file set", secrets.Config{}, "--encryption-key-file"},
		{"key file missing", secrets.Config{KeyFile: missing}, missing},
		{"old key file missing", secrets.Config{KeyFile: good, OldKeyFiles: []string{missing}}, missing},
	}
	for _, tt := range tests {
		_, err := secrets.LoadKeyring(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadKeyring(%s) = %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
}

func TestGenerateKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.key"), filepath.Join(dir, "second.key")
	for _, path := range []string{first, second} {
		if err := secrets.GenerateKeyFile(path); err != nil {
			t.Fatalf("GenerateKeyFile(%s) = %v", path, err)
		}
		info, err := os.Stat(path)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("Stat(GenerateKeyFile(%s)) = %v, %v; want mode 0600", path, info.Mode(), err)
		}
	}
	a, errA := secrets.LoadKeyring(secrets.Config{KeyFile: first})
	b, errB := secrets.LoadKeyring(secrets.Config{KeyFile: second})
	if errA != nil || errB != nil || a.PrimaryKeyID() == b.PrimaryKeyID() {
		t.Fatalf("LoadKeyring(generated files) = %v, %v; want two different loadable keys", errA, errB)
	}
	before, _ := os.ReadFile(first)
	err := secrets.GenerateKeyFile(first)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), first) {
		t.Errorf("GenerateKeyFile(%s) on an existing file = %v, want fs.ErrExist naming the file", first, err)
	}
	if after, _ := os.ReadFile(first); string(after) != string(before) {
		t.Errorf("GenerateKeyFile(%s) on an existing file changed it", first)
	}
}
