package childproc

import (
	"fmt"
	"os"
	"path/filepath"
)

// CacheEnv names the environment variable that holds the folder where
// `make test/binaries` caches the programs the tests run (the test hub's
// kube-apiserver, Hydra, promtool, the previous release). A CI image that
// carries them built sets it to a folder of its own.
const CacheEnv = "FLEET_MANAGER_CACHE"

// CachePath returns elem joined under the cache folder: $FLEET_MANAGER_CACHE,
// else ~/.cache/fleet-manager, as the scripts under scripts/ choose it.
func CachePath(elem ...string) (string, error) {
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cache folder: %w; set %s", err, CacheEnv)
		}
		dir = filepath.Join(home, ".cache", "fleet-manager")
	}
	return filepath.Join(append([]string{dir}, elem...)...), nil
}
