#!/usr/bin/env bash
# Builds promtool from the Go module proxy into a cache file, once: Debian's
# promtool (bookworm's 2.42, which scripts/dbops/ensure-tools.sh installs with
# Prometheus) has no --http.config.file for its query commands, so it cannot
# send a bearer token, and the user-facing metrics' e2e test reads the fleet
# manager with promtool as a customer would, token and all. A scratch module
# takes promtool as a tool and builds it.
#
#   scripts/prometheus/build-promtool.sh
#
# PROMTOOL_BIN defaults to promtool/promtool in $FLEET_MANAGER_CACHE (default
# ~/.cache/fleet-manager), where
# internal/promtest looks for it. Cold: as long as COLD_BUILD says, which the
# build prints first; when the binary is there and reports the version:
# instant.
set -euo pipefail
progress=$(cd "$(dirname "$0")/.." && pwd)/with-progress.sh

# The Go module github.com/prometheus/prometheus v0.X0Y.Z is Prometheus 3.Y.Z.
PROMETHEUS_MODULE_VERSION=${PROMETHEUS_MODULE_VERSION:-v0.303.1}
PROMTOOL_VERSION=${PROMTOOL_VERSION:-3.3.1}
BIN=${PROMTOOL_BIN:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/promtool/promtool}
# The time the build announces before it starts; the measured ones, with
# their date and load, are in docs/automated-testing.md.
COLD_BUILD="about 8 minutes on 2 busy cores"

built() { [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "version $PROMTOOL_VERSION"; }

if built; then
  echo "promtool $PROMTOOL_VERSION already at $BIN"
  exit 0
fi
mkdir -p "$(dirname "$BIN")"
# One build at a time; a second caller waits and then finds the binary.
exec 9>"$BIN.lock"
flock -n 9 || { echo "waiting for another build of promtool into $BIN" >&2; flock 9; }
if built; then
  echo "promtool $PROMTOOL_VERSION already at $BIN"
  exit 0
fi

echo "building promtool $PROMTOOL_VERSION into $BIN, once: $COLD_BUILD" >&2
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=0
go mod init fleet-manager/promtool-build >/dev/null 2>&1
go get -tool "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION"
# Build next to the target and rename, so no one ever runs a half-written file.
"$progress" "building promtool $PROMTOOL_VERSION" go build -trimpath -o "$BIN.tmp" \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION" \
  github.com/prometheus/prometheus/cmd/promtool
mv -f "$BIN.tmp" "$BIN"
"$BIN" --version
echo "built $BIN in $(( $(date +%s) - start ))s"
