package secrets

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
)

// Config names the master key files.
type Config struct {
	// KeyFile holds the current master key, which seals new values.
	KeyFile string
	// OldKeyFiles hold retired master keys, kept to open values sealed under
	// them until rotate-keys has re-wrapped every value with the current key.
	OldKeyFiles []string
}

// DefaultConfig returns a configuration with no key file: the master key is
// a secret, so there is no default and Validate asks for one.
func DefaultConfig() Config {
	return Config{}
}

// AddFlags binds the configuration to flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.KeyFile, "encryption-key-file", c.KeyFile,
		"file holding the current master key: 32 random bytes, base64 or hex encoded")
	fs.StringSliceVar(&c.OldKeyFiles, "encryption-old-key-files", c.OldKeyFiles,
		"files of retired master keys still needed to decrypt until rotate-keys re-wrapped every value")
}

// Validate reports every invalid setting, naming its flag. It does not read
// the files; LoadKeyring does.
func (c Config) Validate() error {
	var p config.Problems
	if strings.TrimSpace(c.KeyFile) == "" {
		p.Addf("encryption-key-file", "is required: a file holding the current master key (32 random bytes, base64 or hex)")
	}
	for i, f := range c.OldKeyFiles {
		switch {
		case strings.TrimSpace(f) == "":
			p.Addf("encryption-old-key-files", "entry %d is empty", i+1)
		case f == c.KeyFile:
			p.Addf("encryption-old-key-files", "entry %d is --encryption-key-file (%s); list only retired keys", i+1, f)
		}
	}
	return p.Err()
}
