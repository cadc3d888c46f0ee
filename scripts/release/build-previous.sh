#!/usr/bin/env bash
# Builds the previous release's fleet-manager (the commit named in
# scripts/release/previous-release) from this repository's history, once,
# and prints the binary's path on stdout; progress goes to stderr.
#
#   OLD=$(scripts/release/build-previous.sh)
#
# The build is cached in releases/<commit>/ of $FLEET_MANAGER_CACHE (default
# ~/.cache/fleet-manager), or in $FLEET_MANAGER_RELEASE_CACHE/<commit>/; a
# cached binary takes no time.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
commit=$(grep -v '^#' "$root/scripts/release/previous-release" | tr -d '[:space:]')
[[ $commit =~ ^[0-9a-f]{40}$ ]] || { echo "build-previous.sh: scripts/release/previous-release names no commit" >&2; exit 1; }
cache=${FLEET_MANAGER_RELEASE_CACHE:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/releases}/$commit
bin=$cache/fleet-manager
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "build-previous.sh: commit $commit is not in this clone's history (a shallow clone?): git fetch --unshallow, or fetch that commit" >&2
  exit 1
fi
echo "building the previous release's fleet-manager (${commit:0:12}); about a minute with a warm module cache" >&2
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$root" archive "$commit" | tar -x -C "$src"
mkdir -p "$cache"
(cd "$src" && CGO_ENABLED=0 "$root/scripts/with-progress.sh" "building the previous release's fleet-manager" \
  go build -trimpath -o "$bin.tmp" ./cmd/fleet-manager)
mv "$bin.tmp" "$bin"
echo "$bin"
