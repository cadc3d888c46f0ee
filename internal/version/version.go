// Package version holds the build's version, set by the linker
// (-X github.com/fleetmanager/fleet-manager/internal/version.Version=...).
package version

// Version is the release this binary was built from; "dev" for local builds.
var Version = "dev"

// Commit is the VCS commit this binary was built from; "unknown" for local builds.
var Commit = "unknown"
