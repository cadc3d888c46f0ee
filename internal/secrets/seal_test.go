package secrets_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t))
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 1<<18) // 1 MiB
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{"empty", []byte{}},
		{"nil", nil},
		{"small", []byte(marker)},
		{"1 MiB", big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			aad := "hubs.credentials:" + tt.name
			s := seal(t, k, tt.plaintext, aad)
			if s.KeyID != k.PrimaryKeyID() {
				t.Errorf("Seal(%s).KeyID = %q, want %q", tt.name, s.KeyID, k.PrimaryKeyID())
			}
			got, err := k.Open(s, aad)
			if err != nil || got == nil || !bytes.Equal(got, tt.plaintext) {
				t.Errorf("Open(Seal(%s), %q) = %d bytes, %v; want the %d bytes sealed", tt.name, aad, len(got), err, len(tt.plaintext))
			}
		})
	}
}

func TestSealIsFresh(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t))
	const n = 20
	// Every part, wrapped key and value alike, must differ: fresh DEK and nonces.
	parts := map[string][2]int{"wrapped data key": {1, 61}, "value nonce": {61, 73}, "value ciphertext": {73, -1}}
	seen := map[string]map[string]bool{}
	for i := range n {
		s := seal(t, k, []byte(marker), "aad")
		for name, r := range parts {
			end := r[1]
			if end < 0 {
				end = len(s.Data)
			}
			part := string(s.Data[r[0]:end])
			if seen[name] == nil {
				seen[name] = map[string]bool{}
			}
			if seen[name][part] {
				t.Errorf("Seal(marker) #%d repeats the %s of an earlier seal", i+1, name)
			}
			seen[name][part] = true
		}
	}
}

func TestSealHidesPlaintext(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t))
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{"marker alone", []byte(marker)},
		{"marker inside", append(append(bytes.Repeat([]byte("a"), 100), marker...), bytes.Repeat([]byte("z"), 100)...)},
		{"marker repeated", bytes.Repeat([]byte(marker), 1000)},
	}
	for _, tt := range tests {
		s := seal(t, k, tt.plaintext, "aad")
		if bytes.Contains(s.Data, []byte(marker)) || bytes.Contains(s.Data, []byte(marker[:16])) {
			t.Errorf("Seal(%s).Data contains the plaintext marker", tt.name)
		}
	}
}

func TestOpenWrongAAD(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t))
	const aad = "hubs.credentials:hub-1"
	s := seal(t, k, []byte(marker), aad)
	for _, wrong := range []string{"", "hubs.credentials:hub-2", "hubs.kubeconfig:hub-1", aad + " ", "Hubs.credentials:hub-1"} {
		got, err := k.Open(s, wrong)
		if !errors.Is(err, secrets.ErrDecrypt) || got != nil {
			t.Errorf("Open(Seal(%q), %q) = %q, %v; want nil, ErrDecrypt", aad, wrong, got, err)
		}
		if err != nil && strings.Contains(err.Error(), marker) {
			t.Errorf("Open(Seal(%q), %q) error %q contains the plaintext", aad, wrong, err)
		}
	}
}

func TestOpenTamperedData(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t))
	const aad = "aad"
	s := seal(t, k, []byte(marker), aad)
	for i := range s.Data {
		for bit := range 8 {
			bad := secrets.Sealed{KeyID: s.KeyID, Data: bytes.Clone(s.Data)}
			bad.Data[i] ^= 1 << bit
			if got, err := k.Open(bad, aad); !errors.Is(err, secrets.ErrDecrypt) {
				t.Errorf("Open(Data with byte %d bit %d flipped) = %q, %v; want ErrDecrypt", i, bit, got, err)
			}
		}
	}
	for n := range len(s.Data) {
		bad := secrets.Sealed{KeyID: s.KeyID, Data: s.Data[:n]}
		if got, err := k.Open(bad, aad); !errors.Is(err, secrets.ErrDecrypt) {
			t.Errorf("Open(Data cut to %d bytes) = %q, %v; want ErrDecrypt", n, got, err)
		}
	}
	long := secrets.Sealed{KeyID: s.KeyID, Data: append(bytes.Clone(s.Data), 0)}
	if got, err := k.Open(long, aad); !errors.Is(err, secrets.ErrDecrypt) {
		t.Errorf("Open(Data with a byte appended) = %q, %v; want ErrDecrypt", got, err)
	}
}

func TestOpenKeyID(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	both := newKeyring(t, a, b)
	onlyB := newKeyring(t, b)
	s := seal(t, both, []byte(marker), "aad")
	tests := []struct {
		name  string
		k     *secrets.Keyring
		keyID string
		want  error
	}{
		{"key not in keyring", onlyB, s.KeyID, secrets.ErrUnknownKey},
		{"empty key id", both, "", secrets.ErrUnknownKey},
		{"made-up key id", both, "0123456789abcdef", secrets.ErrUnknownKey},
		{"relabelled with the other known key", both, onlyB.PrimaryKeyID(), secrets.ErrDecrypt},
	}
	for _, tt := range tests {
		got, err := tt.k.Open(secrets.Sealed{KeyID: tt.keyID, Data: s.Data}, "aad")
		if !errors.Is(err, tt.want) {
			t.Errorf("Open(%s) = %q, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func TestKeyringConcurrentUse(t *testing.T) {
	t.Parallel()
	k := newKeyring(t, newKey(t), newKey(t))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			aad := fmt.Sprintf("row:%d", i)
			for range 50 {
				s, err := k.Seal([]byte(marker), aad)
				if err == nil {
					var got []byte
					got, err = k.Open(s, aad)
					if err == nil && string(got) != marker {
						err = fmt.Errorf("Open(Seal(marker, %q)) = %q, want marker", aad, got)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Seal/Open: %v", err)
	}
}

func BenchmarkSeal1KiB(b *testing.B) {
	k := newKeyring(b, newKey(b))
	value := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if _, err := k.Seal(value, "hubs.credentials:bench"); err != nil {
			b.Fatalf("Seal(1 KiB) = %v", err)
		}
	}
}

func BenchmarkOpen1KiB(b *testing.B) {
	k := newKeyring(b, newKey(b))
	value := bytes.Repeat([]byte("x"), 1024)
	s := seal(b, k, value, "hubs.credentials:bench")
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if _, err := k.Open(s, "hubs.credentials:bench"); err != nil {
			b.Fatalf("Open(1 KiB) = %v", err)
		}
	}
}
