package secrets_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

func TestRotation(t *testing.T) {
	t.Parallel()
	keyA, keyB := newKey(t), newKey(t)
	ringA := newKeyring(t, keyA)
	ringB := newKeyring(t, keyB, keyA)
	onlyB := newKeyring(t, keyB)
	const aad = "hubs.credentials:hub-1"
	old := seal(t, ringA, []byte(marker), aad)

	if got, err := ringB.Open(old, aad); err != nil || string(got) != marker {
		t.Fatalf("B.Open(sealed by A) = %q, %v; want marker", got, err)
	}
	re, changed, err := ringB.Rewrap(old, aad)
	if err != nil || !changed {
		t.Fatalf("B.Rewrap(sealed by A) = _, %v, %v; want true, nil", changed, err)
	}
	if re.KeyID != ringB.PrimaryKeyID() || re.KeyID == old.KeyID {
		t.Errorf("B.Rewrap(sealed by A).KeyID = %q, want B's primary %q (A's is %q)", re.KeyID, ringB.PrimaryKeyID(), old.KeyID)
	}
	if !bytes.Equal(re.Data[73:], old.Data[73:]) || len(re.Data) != len(old.Data) {
		t.Errorf("B.Rewrap(sealed by A) changed the value's ciphertext; want only the wrapped data key changed")
	}
	tests := []struct {
		name string
		k    *secrets.Keyring
		s    secrets.Sealed
		want error
	}{
		{"B opens re-wrapped", ringB, re, nil},
		{"only-B opens re-wrapped", onlyB, re, nil},
		{"only-B cannot open the old value", onlyB, old, secrets.ErrUnknownKey},
		{"A cannot open re-wrapped", ringA, re, secrets.ErrUnknownKey},
	}
	for _, tt := range tests {
		got, err := tt.k.Open(tt.s, aad)
		if !errors.Is(err, tt.want) || (tt.want == nil && string(got) != marker) {
			t.Errorf("Open(%s) = %q, %v; want marker, %v", tt.name, got, err, tt.want)
		}
	}
}

func TestRewrapCurrent(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t), newKey(t))
	s := seal(t, k, []byte(marker), "aad")
	got, changed, err := k.Rewrap(s, "aad")
	if err != nil || changed || got.KeyID != s.KeyID || !bytes.Equal(got.Data, s.Data) {
		t.Errorf("Rewrap(current value) = %q, %v, %v; want it unchanged, false, nil", got.KeyID, changed, err)
	}
}

func TestRewrapRefuses(t *testing.T) {
	t.Parallel()
	keyA := newKey(t)
	ringA := newKeyring(t, keyA)
	ringB := newKeyring(t, newKey(t), keyA)
	s := seal(t, ringA, []byte(marker), "aad")
	flip := func(i int) secrets.Sealed {
		d := bytes.Clone(s.Data)
		d[i] ^= 1
		return secrets.Sealed{KeyID: s.KeyID, Data: d}
	}
	tests := []struct {
		name string
		k    *secrets.Keyring
		s    secrets.Sealed
		aad  string
		want error
	}{
		{"corrupt value ciphertext", ringB, flip(len(s.Data) - 20), "aad", secrets.ErrDecrypt},
		{"corrupt value tag", ringB, flip(len(s.Data) - 1), "aad", secrets.ErrDecrypt},
		{"corrupt wrapped key", ringB, flip(20), "aad", secrets.ErrDecrypt},
		{"wrong aad", ringB, s, "other", secrets.ErrDecrypt},
		{"unknown key", newKeyring(t, newKey(t)), s, "aad", secrets.ErrUnknownKey},
	}
	for _, tt := range tests {
		got, changed, err := tt.k.Rewrap(tt.s, tt.aad)
		if !errors.Is(err, tt.want) || changed || got.Data != nil {
			t.Errorf("Rewrap(%s) = %d bytes, %v, %v; want nothing, false, %v", tt.name, len(got.Data), changed, err, tt.want)
		}
	}
}
