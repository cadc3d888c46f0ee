package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
)

// The files of a development key directory.
const (
	devKeyFile  = "dev-signing-key.pem"
	devJWKSFile = "jwks.json"
	devKeyBits  = 2048
)

// DevKey is the development signing key: tokens it mints verify with a
// Verifier whose DevKeyDir is the key's directory.
type DevKey struct {
	// KID is the key id, the RFC 7638 thumbprint of the public key.
	KID string
	// PrivateKey signs development tokens.
	PrivateKey *rsa.PrivateKey
	// JWKSPath is the file holding the public key as a JWKS.
	JWKSPath string
}

// EnsureDevKey returns the development key of dir, creating dir (0700), an
// RSA key (dev-signing-key.pem, 0600) and its JWKS (jwks.json) on first use.
// Later calls, from this process or another, load the same key.
func EnsureDevKey(dir string) (*DevKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("EnsureDevKey(%s): %w", dir, err)
	}
	key, err := loadOrCreateKey(filepath.Join(dir, devKeyFile))
	if err != nil {
		return nil, fmt.Errorf("EnsureDevKey(%s): %w", dir, err)
	}
	kid := thumbprint(&key.PublicKey)
	jwks, err := json.MarshalIndent(map[string]any{"keys": []any{publicJWK(&key.PublicKey, kid)}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("EnsureDevKey(%s): %w", dir, err)
	}
	jwksPath := filepath.Join(dir, devJWKSFile)
	if err := writeFileIfChanged(jwksPath, append(jwks, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("EnsureDevKey(%s): %w", dir, err)
	}
	return &DevKey{KID: kid, PrivateKey: key, JWKSPath: jwksPath}, nil
}

// loadOrCreateKey reads the key at path, generating it when missing. The new
// key is linked into place, so concurrent first uses agree on one key.
func loadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	key, err := readKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key, err = rsa.GenerateKey(rand.Reader, devKeyBits)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	err = createExclusive(path, data)
	if errors.Is(err, os.ErrExist) {
		return readKey(path)
	}
	if err != nil {
		return nil, err
	}
	return key, nil
}

// readKey parses the PEM RSA private key (PKCS #8 or PKCS #1) at path.
func readKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	if block.Type == "RSA PRIVATE KEY" {
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an RSA key", path)
	}
	return key, nil
}

// createExclusive writes data to a private temporary file and hard-links it
// to path, failing with os.ErrExist when path already exists.
func createExclusive(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}

// writeFileIfChanged replaces path with data, atomically, unless it already holds data.
func writeFileIfChanged(path string, data []byte, perm os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// publicJWK returns the JWK of pub for RS256 signatures.
func publicJWK(pub *rsa.PublicKey, kid string) map[string]string {
	n, e := rsaJWKMembers(pub)
	return map[string]string{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": n, "e": e}
}

// thumbprint returns the RFC 7638 JWK thumbprint of pub: the SHA-256 of the
// required members in lexicographic order, without white space.
func thumbprint(pub *rsa.PublicKey) string {
	n, e := rsaJWKMembers(pub)
	sum := sha256.Sum256(fmt.Appendf(nil, `{"e":"%s","kty":"RSA","n":"%s"}`, e, n))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// rsaJWKMembers returns the base64url modulus and exponent of pub.
func rsaJWKMembers(pub *rsa.PublicKey) (n, e string) {
	enc := base64.RawURLEncoding
	return enc.EncodeToString(pub.N.Bytes()), enc.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
}
