// Package secrets encrypts the secret values the service stores: hub
// credentials, auto-import kubeconfigs and tokens, import manifests.
//
// It uses envelope encryption. Each value gets a fresh random 256-bit data key
// (DEK) and is sealed with AES-256-GCM under it; the DEK is wrapped with
// AES-256-GCM under a master key (KEK) read from a file. The master key's id is
// stored beside the ciphertext, so a new master key can be added and the old
// values re-wrapped (Keyring.Rewrap) without decrypting and re-encrypting
// every value: only the 60-byte wrapped DEK changes.
//
// A table stores a Sealed value in two columns, `<col>_key_id text` and
// `<col> bytea`. Sealed.Data is laid out as
//
//	offset  length  content
//	0       1       version, 1
//	1       12      nonce of the wrapped DEK
//	13      48      AES-256-GCM(KEK, DEK), AAD = version byte || key id || aad
//	61      12      nonce of the value
//	73      n+16    AES-256-GCM(DEK, value), AAD = aad
//
// where the key id is Sealed.KeyID: the first 16 hex characters of the
// SHA-256 of the master key. aad names where the value is stored, for example
// "hubs.credentials:<id>", so a ciphertext copied to another row or column, or
// relabelled with another key id, fails to open. Nonces are random: a DEK seals
// exactly one value, and a master key may wrap far fewer than the 2^32 DEKs
// random 96-bit nonces allow.
//
// Errors name the operation, the aad and the key id, never plaintext or key
// material; a key file's content is never echoed either.
package secrets
