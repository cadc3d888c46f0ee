package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ConfigEnv names the environment variable that overrides the config file's path.
const ConfigEnv = "FLEETCTL_CONFIG"

// Config is what `fleetctl login` keeps between commands: where the API is
// and how to get a token for it. The file holds secrets, so it is written
// with mode 0600 in a directory of mode 0700.
type Config struct {
	// URL is the API's base URL, e.g. http://localhost:8000/api/fleet_manager/v1.
	URL string `json:"url"`
	// AccessToken is the last bearer token, given with --token or fetched.
	AccessToken string `json:"access_token,omitempty"`
	// Expiry is when AccessToken expires; zero when unknown.
	Expiry time.Time `json:"expiry,omitzero"`
	// RefreshToken is the offline or refresh token of the refresh_token grant.
	RefreshToken string `json:"refresh_token,omitempty"`
	// TokenURL is the OAuth2 token endpoint; empty with a plain --token.
	TokenURL string `json:"token_url,omitempty"`
	// ClientID and ClientSecret identify the OAuth2 client.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes and Audience are asked for with each new token.
	Scopes   []string `json:"scopes,omitempty"`
	Audience string   `json:"audience,omitempty"`
	// Insecure skips the TLS certificate checks of the API and the token URL.
	Insecure bool `json:"insecure,omitempty"`
	// InsecureHTTP sends the credentials over plain HTTP to a host that is
	// not loopback (login --insecure-http).
	InsecureHTTP bool `json:"insecure_http,omitempty"`
}

// ConfigPath returns the config file's path: $FLEETCTL_CONFIG, else
// fleetctl/config.json in the user's config directory.
func ConfigPath(env func(string) (string, bool)) (string, error) {
	if p, ok := env(ConfigEnv); ok && p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the config directory (set %s): %w", ConfigEnv, err)
	}
	return filepath.Join(dir, "fleetctl", "config.json"), nil
}

// errNotLoggedIn is LoadConfig's answer when there is no config file.
var errNotLoggedIn = errors.New("not logged in: run `fleetctl login --url URL ...` first")

// LoadConfig reads the config file at path.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotLoggedIn
	}
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("reading the config file %s: %w", path, err)
	}
	if cfg.URL == "" {
		return nil, errNotLoggedIn
	}
	return &cfg, nil
}

// SaveConfig writes cfg to path atomically, mode 0600, creating its
// directory with mode 0700. An existing file's mode is set to 0600 as well.
func SaveConfig(path string, cfg *Config) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the config directory: %w", err)
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp already makes it 0600; Chmod states it whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the config file: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the config file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	return nil
}

// RemoveConfig deletes the config file; a missing one is not an error.
func RemoveConfig(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the config file: %w", err)
	}
	return nil
}
