package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// keySize is the size of master and data keys: AES-256.
const keySize = 32

// Keyring holds the master keys: the primary one, which wraps the data keys
// of new values, and retired ones, which only unwrap. It is safe for
// concurrent use.
type Keyring struct {
	primary masterKey
	// keys holds every master key by id, the primary one included.
	keys map[string]masterKey
}

// masterKey is a master key ready to wrap and unwrap data keys; the key bytes
// themselves are not kept.
type masterKey struct {
	id   string
	aead cipher.AEAD
}

// NewKeyring returns a keyring whose primary key is primary and which also
// opens values sealed under the old keys. Every key must be 32 bytes. The
// keyring does not keep the slices, so the caller may clear them.
func NewKeyring(primary []byte, old ...[]byte) (*Keyring, error) {
	p, err := newMasterKey(primary)
	if err != nil {
		return nil, fmt.Errorf("NewKeyring(primary): %w", err)
	}
	k := &Keyring{primary: p, keys: map[string]masterKey{p.id: p}}
	for i, b := range old {
		m, err := newMasterKey(b)
		if err != nil {
			return nil, fmt.Errorf("NewKeyring(old key %d): %w", i+1, err)
		}
		if _, dup := k.keys[m.id]; !dup {
			k.keys[m.id] = m
		}
	}
	return k, nil
}

// newMasterKey checks the key's size and prepares its cipher.
func newMasterKey(key []byte) (masterKey, error) {
	if len(key) != keySize {
		return masterKey{}, fmt.Errorf("key is %d bytes, want %d", len(key), keySize)
	}
	aead, err := newGCM(key)
	if err != nil {
		return masterKey{}, err
	}
	return masterKey{id: keyID(key), aead: aead}, nil
}

// newGCM returns AES-GCM with the standard 12-byte nonce and 16-byte tag,
// the sizes the data layout assumes.
func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// keyID returns the first 16 hex characters of the key's SHA-256: stable,
// short, and revealing nothing useful about the key.
func keyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// PrimaryKeyID returns the id of the master key that seals new values.
func (k *Keyring) PrimaryKeyID() string {
	return k.primary.id
}

// Holds reports whether the keyring has the master key with id keyID, the
// key id stored beside a sealed value.
func (k *Keyring) Holds(keyID string) bool {
	_, ok := k.keys[keyID]
	return ok
}

// LoadKeyring reads the master keys the configuration names. A key file holds
// 32 bytes encoded as standard base64 or hex, surrounding white space
// ignored; errors name the file but never show its content.
func LoadKeyring(cfg Config) (*Keyring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("LoadKeyring: %w", err)
	}
	primary, err := readKeyFile(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("LoadKeyring(%s): %w", cfg.KeyFile, err)
	}
	keys := [][]byte{primary}
	defer func() {
		for _, key := range keys {
			clear(key)
		}
	}()
	for _, path := range cfg.OldKeyFiles {
		key, err := readKeyFile(path)
		if err != nil {
			return nil, fmt.Errorf("LoadKeyring(%s): %w", path, err)
		}
		keys = append(keys, key)
	}
	return NewKeyring(keys[0], keys[1:]...)
}

// readKeyFile reads and decodes one key file.
func readKeyFile(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		// os errors carry the path and the cause, never the content.
		return nil, err
	}
	defer clear(raw)
	return decodeKey(raw)
}

// decodeKey decodes a 32-byte key written as hex or standard base64. Hex is
// tried first: 64 hex digits are also valid base64 (of 48 bytes), while the
// 44 characters of a 32-byte key in base64 are never hex. Decoder errors are
// dropped because they quote the offending character.
func decodeKey(raw []byte) ([]byte, error) {
	text := bytes.TrimSpace(raw)
	if len(text) == 0 {
		return nil, errors.New("key file is empty")
	}
	key := make([]byte, max(hex.DecodedLen(len(text)), base64.StdEncoding.DecodedLen(len(text))))
	n, err := hex.Decode(key, text)
	if err != nil {
		n, err = base64.StdEncoding.Decode(key, text)
	}
	switch {
	case err != nil:
		clear(key)
		return nil, fmt.Errorf("key file holds neither base64 nor hex (want %d random bytes, base64 or hex encoded)", keySize)
	case n != keySize:
		clear(key)
		return nil, fmt.Errorf("key file holds a %d-byte key, want %d bytes (AES-256)", n, keySize)
	}
	return key[:keySize:keySize], nil
}

// GenerateKeyFile writes a new random master key to path, base64 encoded,
// with mode 0600. It refuses to overwrite an existing file, so an existing key
// (and every value sealed under it) is never lost.
func GenerateKeyFile(path string) error {
	key := make([]byte, keySize)
	defer clear(key)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("GenerateKeyFile(%s): %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("GenerateKeyFile(%s): %w", path, err)
	}
	text := []byte(base64.StdEncoding.EncodeToString(key) + "\n")
	defer clear(text)
	// Chmod in case the umask took bits away from the owner; Sync so a key a
	// value may already be sealed under survives a crash.
	err = errors.Join(f.Chmod(0o600), write(f, text), f.Sync())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("GenerateKeyFile(%s): %w", path, err)
	}
	return nil
}

// write writes all of b to f.
func write(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}
