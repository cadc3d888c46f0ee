#!/usr/bin/env bash
# Builds open-cluster-management's engines from the Go module proxy into a
# cache folder, once: registration (hub controller and klusterlet agent),
# placement (hub controller) and work (hub manager and klusterlet agent), the
# upstream programs internal/hub/ocmtest runs beside the test hub.
#
#   scripts/ocm/build-ocm.sh [OUT_DIR]
#
# OUT_DIR defaults to $OCM_BIN_DIR or ocm-$OCM_VERSION in $FLEET_MANAGER_CACHE
# (default ~/.cache/fleet-manager), where internal/hub/ocmtest looks for the
# binaries. The module is downloaded from a folder outside any module (so no
# go.mod here changes) and built inside a writable copy of itself with its
# own go.mod (its vendor folder is not in the module download, hence
# -mod=mod). Cold: as long as COLD_BUILD says, which the build prints first,
# with a progress line from with-progress.sh; when the binaries are there
# and report the version: instant.
set -euo pipefail
progress=$(cd "$(dirname "$0")/.." && pwd)/with-progress.sh

OCM_VERSION=${OCM_VERSION:-v1.0.0}
OUT=${1:-${OCM_BIN_DIR:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/ocm-$OCM_VERSION}}
PROGRAMS="registration placement work"
# The time the build announces before it starts; the measured ones, with
# their date and load, are in docs/automated-testing.md.
COLD_BUILD="about 4 minutes on 2 shared cores, up to 12 on busy ones"

built() {
  local p
  for p in $PROGRAMS; do
    [ -x "$OUT/$p" ] && "$OUT/$p" --version 2>/dev/null | grep -q "$OCM_VERSION" || return 1
  done
}

if built; then
  echo "open-cluster-management $OCM_VERSION already in $OUT"
  exit 0
fi
mkdir -p "$OUT"
# One build at a time (it takes gigabytes of memory); a second caller waits
# and then finds the binaries.
exec 9>"$OUT/.build.lock"
flock -n 9 || { echo "waiting for another build of open-cluster-management into $OUT" >&2; flock 9; }
if built; then
  echo "open-cluster-management $OCM_VERSION already in $OUT"
  exit 0
fi

echo "building open-cluster-management $OCM_VERSION ($PROGRAMS) into $OUT, once: $COLD_BUILD" >&2
start=$(date +%s)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=0
src=$(go mod download -json "open-cluster-management.io/ocm@$OCM_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "go mod download did not report where open-cluster-management.io/ocm@$OCM_VERSION is" >&2; exit 1; }
# The module cache is read-only; -mod=mod may need to write go.sum.
cp -r "$src" ocm
chmod -R u+w ocm
cd ocm
ldflags="-s -w -X open-cluster-management.io/ocm/pkg/version.versionFromGit=$OCM_VERSION"
"$progress" "building open-cluster-management $OCM_VERSION" go build -trimpath -o "$work/bin/" \
  -ldflags "$ldflags" ./cmd/registration ./cmd/placement ./cmd/work
# Move next to the targets and rename, so no one ever runs a half-written file.
for p in $PROGRAMS; do
  cp "$work/bin/$p" "$OUT/$p.tmp"
  mv -f "$OUT/$p.tmp" "$OUT/$p"
done
for p in $PROGRAMS; do
  echo "$p: $("$OUT/$p" --version)"
done
echo "built $OUT in $(( $(date +%s) - start ))s"
