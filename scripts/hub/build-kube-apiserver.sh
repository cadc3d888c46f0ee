#!/usr/bin/env bash
# Builds kube-apiserver from the Go module proxy into a cache folder, once:
# a scratch module requires k8s.io/kubernetes and replaces each published
# k8s.io staging module with its matching version (kubernetes' own go.mod
# points them at ./staging, which a module download does not have).
#
#   scripts/hub/build-kube-apiserver.sh [OUT_DIR]
#
# OUT_DIR defaults to $HUB_BIN_DIR or hub-bin in $FLEET_MANAGER_CACHE (default
# ~/.cache/fleet-manager). Cold:
# as long as COLD_BUILD says, which the build prints first (then a progress
# line from with-progress.sh until it ends), with gigabytes of build cache and
# of memory (docs/automated-testing.md); warm: seconds;
# when the binary is there and reports the version: instant.
# ensure-hub-binaries.sh calls it.
set -euo pipefail
progress=$(cd "$(dirname "$0")/.." && pwd)/with-progress.sh

K8S_VERSION=${K8S_VERSION:-1.37.2}
STAGING_VERSION=${STAGING_VERSION:-0.37.2}
OUT=${1:-${HUB_BIN_DIR:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/hub-bin}}
BIN="$OUT/kube-apiserver"
# The time the build announces before it starts; the measured ones, with
# their date and load, are in docs/automated-testing.md.
COLD_BUILD="about 5 minutes on 2 idle cores, about 30 on 2 busy ones"

built() { [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "v$K8S_VERSION\$"; }

if built; then
  echo "kube-apiserver v$K8S_VERSION already at $BIN"
  exit 0
fi
mkdir -p "$OUT"
# One build at a time (it takes gigabytes of memory); a second caller waits
# and then finds the binary.
exec 9>"$OUT/.kube-apiserver.lock"
flock -n 9 || { echo "waiting for another build of kube-apiserver into $OUT" >&2; flock 9; }
if built; then
  echo "kube-apiserver v$K8S_VERSION already at $BIN"
  exit 0
fi

echo "building kube-apiserver v$K8S_VERSION into $OUT, once: $COLD_BUILD" >&2
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=0
go mod init fleet-manager/hub-build >/dev/null 2>&1
go mod edit -require="k8s.io/kubernetes@v$K8S_VERSION"
# The staging modules kubernetes replaces with ./staging/src/k8s.io/...; the
# two sample modules are not published and not needed.
go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
gomod=$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION/go.mod
for m in $(sed -n 's|^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\1|p' "$gomod"); do
  case "$m" in k8s.io/sample-cli-plugin|k8s.io/sample-controller) continue ;; esac
  go mod edit -replace="$m=$m@v$STAGING_VERSION"
done
# tidy resolves the rest of the graph; it may complain about test-only
# imports of the unpublished modules, which the build does not need: its
# output is shown only when the build fails.
cat > main.go <<'GO'
package main

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"

func main() {}
GO
go mod tidy >prep.log 2>&1 || true
rm main.go
go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" >>prep.log 2>&1 || true
# Build next to the target and rename, so no one ever runs a half-written file.
if ! "$progress" "building kube-apiserver v$K8S_VERSION" go build -trimpath -o "$BIN.tmp" \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)" \
  k8s.io/kubernetes/cmd/kube-apiserver; then
  echo "--- go mod tidy / go get output:" >&2
  cat prep.log >&2
  rm -f "$BIN.tmp"
  exit 1
fi
mv -f "$BIN.tmp" "$BIN"
"$BIN" --version
echo "built $BIN in $(( $(date +%s) - start ))s"
