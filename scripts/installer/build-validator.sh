#!/usr/bin/env bash
# Builds installer-validator (scripts/installer/validator/main.go) into a
# cache file, once: a small program that checks install-config documents with
# the OpenShift installer's own code (github.com/openshift/installer,
# pkg/types/validation), which the pool tests run on every install-config
# Fleet Manager renders for Hive. The installer's go.mod replaces many
# modules, and replace directives apply only in the main module, so the
# program is copied into a writable copy of the installer's module download
# and built there (its vendor folder is not in the download: -mod=mod).
#
#   scripts/installer/build-validator.sh
#
# INSTALLER_VALIDATOR_BIN defaults to installer-validator/installer-validator
# in $FLEET_MANAGER_CACHE (default ~/.cache/fleet-manager), where
# internal/fleet/installertest looks for it. Cold: as long as COLD_BUILD says,
# which the build prints first; when the binary is there and reports this
# version and source: instant. A change to main.go rebuilds it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
progress=$here/../with-progress.sh

INSTALLER_VERSION=${INSTALLER_VERSION:-v0.91.0}
BIN=${INSTALLER_VALIDATOR_BIN:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/installer-validator/installer-validator}
# The time the build announces before it starts; the measured ones, with
# their date and load, are in docs/automated-testing.md.
COLD_BUILD="about 2 minutes on 2 busy cores"
SOURCE=$(sha256sum "$here/validator/main.go" | cut -c1-16)

built() {
  [ -x "$BIN" ] && [ "$("$BIN" -version 2>/dev/null)" = "installer-validator github.com/openshift/installer@$INSTALLER_VERSION source $SOURCE" ]
}

if built; then
  echo "installer-validator ($INSTALLER_VERSION) already at $BIN"
  exit 0
fi
mkdir -p "$(dirname "$BIN")"
# One build at a time; a second caller waits and then finds the binary.
exec 9>"$BIN.lock"
flock -n 9 || { echo "waiting for another build of installer-validator into $BIN" >&2; flock 9; }
if built; then
  echo "installer-validator ($INSTALLER_VERSION) already at $BIN"
  exit 0
fi

echo "building installer-validator against github.com/openshift/installer@$INSTALLER_VERSION into $BIN, once: $COLD_BUILD" >&2
start=$(date +%s)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off
# Downloaded from outside any module, so no go.mod takes it as a requirement.
dir=$(cd "$work" && go mod download -json "github.com/openshift/installer@$INSTALLER_VERSION" |
  sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -f "$dir/go.mod" ] || { echo "go mod download gave no module folder for the installer" >&2; exit 1; }
cp -r "$dir" "$work/installer"
chmod -R u+w "$work/installer"
mkdir -p "$work/installer/cmd/fleet-manager-installer-validator"
cp "$here/validator/main.go" "$work/installer/cmd/fleet-manager-installer-validator/main.go"
cd "$work/installer"
# Build next to the target and rename, so no one ever runs a half-written file.
"$progress" "building installer-validator" go build -trimpath -o "$BIN.tmp" \
  -ldflags "-s -w -X main.installerVersion=$INSTALLER_VERSION -X main.source=$SOURCE" \
  ./cmd/fleet-manager-installer-validator
mv -f "$BIN.tmp" "$BIN"
"$BIN" -version
echo "built $BIN in $(( $(date +%s) - start ))s"
