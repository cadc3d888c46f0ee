#!/usr/bin/env bash
# Builds the governance policy framework's hub component, the
# governance-policy-propagator, from the Go module proxy into a cache folder,
# once: the upstream program internal/hub/governancetest runs beside the test
# hub and the OCM hub controllers.
#
#   scripts/governance/build-propagator.sh [OUT_DIR]
#
# OUT_DIR defaults to $GOVERNANCE_BIN_DIR or governance-$PROPAGATOR_VERSION in
# $FLEET_MANAGER_CACHE (default ~/.cache/fleet-manager), where
# internal/hub/governancetest looks for the binary. The module is downloaded
# from a folder outside any module (so no go.mod here changes) and built
# inside a writable copy of itself with its own go.mod (-mod=mod, as its
# vendor folder is not in the module download). The program has no --version
# flag, so a stamp file beside it records the version it was built from.
# Cold: as long as COLD_BUILD says, which the build prints first, with a
# progress line from with-progress.sh; when the binary and its stamp are
# there: instant.
set -euo pipefail
progress=$(cd "$(dirname "$0")/.." && pwd)/with-progress.sh

PROPAGATOR_VERSION=${PROPAGATOR_VERSION:-v0.19.0}
MODULE=open-cluster-management.io/governance-policy-propagator
OUT=${1:-${GOVERNANCE_BIN_DIR:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/governance-$PROPAGATOR_VERSION}}
# The time the build announces before it starts; the measured ones, with
# their date and load, are in docs/automated-testing.md.
COLD_BUILD="about 2 minutes on 2 shared cores, up to 5 on busy ones"

built() {
  [ -x "$OUT/governance-policy-propagator" ] &&
    [ "$(cat "$OUT/governance-policy-propagator.version" 2>/dev/null)" = "$MODULE@$PROPAGATOR_VERSION" ]
}

if built; then
  echo "governance-policy-propagator $PROPAGATOR_VERSION already in $OUT"
  exit 0
fi
mkdir -p "$OUT"
# One build at a time (it takes gigabytes of memory); a second caller waits
# and then finds the binary.
exec 9>"$OUT/.build.lock"
flock -n 9 || { echo "waiting for another build of governance-policy-propagator into $OUT" >&2; flock 9; }
if built; then
  echo "governance-policy-propagator $PROPAGATOR_VERSION already in $OUT"
  exit 0
fi

echo "building governance-policy-propagator $PROPAGATOR_VERSION into $OUT, once: $COLD_BUILD" >&2
start=$(date +%s)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=0
src=$(go mod download -json "$MODULE@$PROPAGATOR_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "go mod download did not report where $MODULE@$PROPAGATOR_VERSION is" >&2; exit 1; }
# The module cache is read-only; -mod=mod may need to write go.sum.
cp -r "$src" propagator
chmod -R u+w propagator
cd propagator
ldflags="-s -w -X $MODULE/version.Version=$PROPAGATOR_VERSION"
"$progress" "building governance-policy-propagator $PROPAGATOR_VERSION" go build -trimpath \
  -o "$work/bin/governance-policy-propagator" -ldflags "$ldflags" .
# Move next to the target and rename, so no one ever runs a half-written
# file; the stamp comes last, so a stamp always names a whole binary.
rm -f "$OUT/governance-policy-propagator.version"
cp "$work/bin/governance-policy-propagator" "$OUT/governance-policy-propagator.tmp"
mv -f "$OUT/governance-policy-propagator.tmp" "$OUT/governance-policy-propagator"
echo "$MODULE@$PROPAGATOR_VERSION" >"$OUT/governance-policy-propagator.version.tmp"
mv -f "$OUT/governance-policy-propagator.version.tmp" "$OUT/governance-policy-propagator.version"
echo "built $OUT in $(( $(date +%s) - start ))s"
