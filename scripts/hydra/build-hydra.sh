#!/usr/bin/env bash
# Builds Ory Hydra (the OIDC issuer the tests use) from the Go module proxy into
# a cache file, once: a scratch module takes hydra as a tool with hydra's own
# replace of gobuffalo/pop, and builds it with cgo and the sqlite tag (the
# in-memory DSN needs sqlite).
#
#   scripts/hydra/build-hydra.sh
#
# HYDRA_BIN defaults to hydra/hydra in $FLEET_MANAGER_CACHE (default
# ~/.cache/fleet-manager). Cold: as long as
# COLD_BUILD says, which the build prints first; when the binary is there and
# reports the version: instant.
set -euo pipefail
progress=$(cd "$(dirname "$0")/.." && pwd)/with-progress.sh

HYDRA_VERSION=${HYDRA_VERSION:-v2.3.0}
# hydra's go.mod replaces gobuffalo/pop; a tool requirement does not inherit
# replaces, so the scratch module repeats it.
POP_REPLACE=${POP_REPLACE:-github.com/ory/pop/v6@v6.2.1-0.20241121111754-e5dfc0f3344b}
BIN=${HYDRA_BIN:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/hydra/hydra}
# The time the build announces before it starts; the measured ones, with
# their date and load, are in docs/automated-testing.md.
COLD_BUILD="about 2.5 minutes on 2 idle cores, about 13 on 2 busy ones"

built() { [ -x "$BIN" ] && "$BIN" version 2>/dev/null | grep -q "$HYDRA_VERSION"; }

if built; then
  echo "hydra $HYDRA_VERSION already at $BIN"
  exit 0
fi
mkdir -p "$(dirname "$BIN")"
# One build at a time; a second caller waits and then finds the binary.
exec 9>"$BIN.lock"
flock -n 9 || { echo "waiting for another build of hydra into $BIN" >&2; flock 9; }
if built; then
  echo "hydra $HYDRA_VERSION already at $BIN"
  exit 0
fi

echo "building hydra $HYDRA_VERSION into $BIN, once: $COLD_BUILD" >&2
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=1
go mod init fleet-manager/hydra-build >/dev/null 2>&1
go mod edit -replace="github.com/gobuffalo/pop/v6=$POP_REPLACE"
go get -tool "github.com/ory/hydra/v2@$HYDRA_VERSION"
# Build next to the target and rename, so no one ever runs a half-written file.
"$progress" "building hydra $HYDRA_VERSION" go build -trimpath -tags sqlite,json1 -o "$BIN.tmp" \
  -ldflags "-s -w -X github.com/ory/hydra/v2/driver/config.Version=$HYDRA_VERSION" \
  github.com/ory/hydra/v2
mv -f "$BIN.tmp" "$BIN"
"$BIN" version
echo "built $BIN in $(( $(date +%s) - start ))s"
