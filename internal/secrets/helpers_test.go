package secrets_test

import (
	"crypto/rand"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

// marker is a recognizable 40-byte plaintext, easy to search for in ciphertext.
const marker = "FLEET-MANAGER-SECRET-MARKER-0123456789!!"

// newKey returns a fresh random 32-byte master key.
func newKey(t testing.TB) []byte {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatalf("rand.Read() = %v", err)
	}
	return key
}

// newKeyring returns a keyring of primary and old, failing the test on error.
func newKeyring(t testing.TB, primary []byte, old ...[]byte) *secrets.Keyring {
	t.Helper()
	k, err := secrets.NewKeyring(primary, old...)
	if err != nil {
		t.Fatalf("NewKeyring() = %v", err)
	}
	return k
}

// seal seals plaintext under aad, failing the test on error.
func seal(t testing.TB, k *secrets.Keyring, plaintext []byte, aad string) secrets.Sealed {
	t.Helper()
	s, err := k.Seal(plaintext, aad)
	if err != nil {
		t.Fatalf("Seal(%d bytes, %q) = %v", len(plaintext), aad, err)
	}
	return s
}
