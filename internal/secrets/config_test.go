package secrets_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/secrets"
)

func TestAddFlags(t *testing.T) {
	t.Parallel()
	cfg := secrets.DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	args := []string{"--encryption-key-file=/keys/current", "--encryption-old-key-files=/keys/a,/keys/b"}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%v) = %v", args, err)
	}
	if cfg.KeyFile != "/keys/current" || !slices.Equal(cfg.OldKeyFiles, []string{"/keys/a", "/keys/b"}) {
		t.Errorf("Config after Parse(%v) = %+v, want /keys/current and [/keys/a /keys/b]", args, cfg)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  secrets.Config
		want []string
	}{
		{"valid", secrets.Config{KeyFile: "/k"}, nil},
		{"valid with old keys", secrets.Config{KeyFile: "/k", OldKeyFiles: []string{"/a", "/b"}}, nil},
		{"default", secrets.DefaultConfig(), []string{"--encryption-key-file: is required"}},
		{"blank key file", secrets.Config{KeyFile: "  "}, []string{"--encryption-key-file: is required"}},
		{"empty old entry", secrets.Config{KeyFile: "/k", OldKeyFiles: []string{"/a", ""}},
			[]string{"--encryption-old-key-files: entry 2 is empty"}},
		{"current listed as old", secrets.Config{KeyFile: "/k", OldKeyFiles: []string{"/k"}},
			[]string{"--encryption-old-key-files: entry 1 is --encryption-key-file"}},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == nil && err != nil {
			t.Errorf("Validate(%s) = %v, want nil", tt.name, err)
		}
		if tt.want != nil && err == nil {
			t.Errorf("Validate(%s) = nil, want %q", tt.name, tt.want)
		}
		for _, w := range tt.want {
			if err != nil && !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%s) = %q, want it to contain %q", tt.name, err, w)
			}
		}
	}
}
