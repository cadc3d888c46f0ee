package secrets

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// Sizes of the parts of Sealed.Data; the package doc draws the layout.
const (
	version     = 1
	nonceSize   = 12
	tagSize     = 16
	wrappedSize = nonceSize + keySize + tagSize // nonce and sealed DEK
	headerSize  = 1 + wrappedSize               // version and wrapped DEK
	minDataSize = headerSize + nonceSize + tagSize
)

// ErrUnknownKey is wrapped by the errors of Open and Rewrap when the value's
// master key is not in the keyring: a retired key file is missing from
// --encryption-old-key-files.
var ErrUnknownKey = errors.New("secrets: unknown master key")

// ErrDecrypt is wrapped by the errors of Open and Rewrap when a value does not
// authenticate: it was stored under another aad (another row or column), or
// its key id or data were altered.
var ErrDecrypt = errors.New("secrets: decryption failed")

// Sealed is an encrypted value as a table stores it, in two columns:
// `<col>_key_id text` and `<col> bytea`.
type Sealed struct {
	// KeyID is the id of the master key that wrapped the value's data key.
	KeyID string
	// Data is the version byte, the wrapped data key and the sealed value.
	Data []byte
}

// Seal encrypts plaintext under a fresh data key wrapped by the primary master
// key. aad names where the value will be stored, e.g. "hubs.credentials:<id>";
// Open must be given the same aad.
func (k *Keyring) Seal(plaintext []byte, aad string) (Sealed, error) {
	dek := make([]byte, keySize)
	defer clear(dek)
	if _, err := rand.Read(dek); err != nil {
		return Sealed{}, fmt.Errorf("Seal(%s): %w", aad, err)
	}
	value, err := newGCM(dek)
	if err != nil {
		return Sealed{}, fmt.Errorf("Seal(%s): %w", aad, err)
	}
	data := make([]byte, 0, minDataSize+len(plaintext))
	data = append(data, version)
	data, err = sealAppend(data, k.primary.aead, dek, wrapAAD(k.primary.id, aad))
	if err != nil {
		return Sealed{}, fmt.Errorf("Seal(%s): %w", aad, err)
	}
	data, err = sealAppend(data, value, plaintext, []byte(aad))
	if err != nil {
		return Sealed{}, fmt.Errorf("Seal(%s): %w", aad, err)
	}
	return Sealed{KeyID: k.primary.id, Data: data}, nil
}

// Open decrypts a value Seal returned for the same aad. Its errors wrap
// ErrUnknownKey or ErrDecrypt.
func (k *Keyring) Open(s Sealed, aad string) ([]byte, error) {
	dek, err := k.unwrap(s, aad)
	if err != nil {
		return nil, fmt.Errorf("Open(%s): %w", aad, err)
	}
	defer clear(dek)
	plaintext, err := openValue(dek, s.Data[headerSize:], aad)
	if err != nil {
		return nil, fmt.Errorf("Open(%s): %w", aad, err)
	}
	return plaintext, nil
}

// Rewrap re-wraps the value's data key with the primary master key, leaving
// the value's own ciphertext as it is, and reports whether it did. A value
// already under the primary key is returned unchanged (and unchecked), with
// false. Before re-wrapping it checks that the value opens, so a corrupt row
// is reported rather than carried over; its errors wrap ErrUnknownKey or
// ErrDecrypt.
func (k *Keyring) Rewrap(s Sealed, aad string) (Sealed, bool, error) {
	if s.KeyID == k.primary.id {
		return s, false, nil
	}
	dek, err := k.unwrap(s, aad)
	if err != nil {
		return Sealed{}, false, fmt.Errorf("Rewrap(%s): %w", aad, err)
	}
	defer clear(dek)
	plaintext, err := openValue(dek, s.Data[headerSize:], aad)
	if err != nil {
		return Sealed{}, false, fmt.Errorf("Rewrap(%s): %w", aad, err)
	}
	clear(plaintext)
	data := make([]byte, 0, len(s.Data))
	data = append(data, version)
	data, err = sealAppend(data, k.primary.aead, dek, wrapAAD(k.primary.id, aad))
	if err != nil {
		return Sealed{}, false, fmt.Errorf("Rewrap(%s): %w", aad, err)
	}
	data = append(data, s.Data[headerSize:]...)
	return Sealed{KeyID: k.primary.id, Data: data}, true, nil
}

// unwrap checks the version and returns the value's data key.
func (k *Keyring) unwrap(s Sealed, aad string) ([]byte, error) {
	m, ok := k.keys[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("master key %q: %w", s.KeyID, ErrUnknownKey)
	}
	if len(s.Data) < minDataSize {
		return nil, fmt.Errorf("%d bytes of data, fewer than the %d of an empty value: %w", len(s.Data), minDataSize, ErrDecrypt)
	}
	if s.Data[0] != version {
		return nil, fmt.Errorf("data version %d, want %d: %w", s.Data[0], version, ErrDecrypt)
	}
	wrapped := s.Data[1:headerSize]
	dek, err := m.aead.Open(nil, wrapped[:nonceSize], wrapped[nonceSize:], wrapAAD(m.id, aad))
	if err != nil {
		// GCM's own error says no more than this.
		return nil, fmt.Errorf("data key does not open under master key %s (wrong aad or altered data): %w", m.id, ErrDecrypt)
	}
	return dek, nil
}

// openValue decrypts the value part of Sealed.Data (nonce and ciphertext).
func openValue(dek, sealed []byte, aad string) ([]byte, error) {
	value, err := newGCM(dek)
	if err != nil {
		return nil, err
	}
	plaintext, err := value.Open(nil, sealed[:nonceSize], sealed[nonceSize:], []byte(aad))
	if err != nil {
		return nil, fmt.Errorf("value does not open under its data key (altered data): %w", ErrDecrypt)
	}
	if plaintext == nil {
		plaintext = []byte{}
	}
	return plaintext, nil
}

// sealAppend appends a random nonce and the AES-GCM sealing of plaintext to dst.
func sealAppend(dst []byte, aead cipher.AEAD, plaintext, ad []byte) ([]byte, error) {
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	dst = append(dst, nonce...)
	return aead.Seal(dst, nonce, plaintext, ad), nil
}

// wrapAAD is the additional data of a wrapped data key: the version byte, the
// master key id (always 16 characters, so the parts cannot run together) and
// the value's aad. It binds the key id column and the place to the data key.
func wrapAAD(keyID, aad string) []byte {
	ad := make([]byte, 0, 1+len(keyID)+len(aad))
	ad = append(ad, version)
	ad = append(ad, keyID...)
	return append(ad, aad...)
}
