#!/usr/bin/env bash
# Lints the three OpenAPI specs with Spectral (spectral:oas) and Redocly
# (recommended), at the versions package-lock.json pins, and fails on any
# warning. The linters are installed with `npm ci` into
# $FLEET_MANAGER_CACHE/openapi-lint/<hash of the lock file> (the cache is
# ~/.cache/fleet-manager by default), once per lock. With --install it only
# installs them (OpenShift CI's build root does, once per image).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lock_hash=$(sha256sum "$here/package-lock.json" | cut -c1-16)
cache=${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}
dir=${OPENAPI_LINT_DIR:-$cache/openapi-lint/$lock_hash}
if [ ! -x "$dir/node_modules/.bin/spectral" ] || [ ! -x "$dir/node_modules/.bin/redocly" ]; then
  echo "openapi-lint: installing the pinned linters into $dir (npm ci, once per package-lock.json)" >&2
  mkdir -p "$dir"
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --cache "$cache/npm")
fi
if [ "${1:-}" = --install ]; then
  exit 0
fi
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
specs=("$root"/openapi/fleet-manager.yaml "$root"/openapi/fleet-manager-admin.yaml "$root"/openapi/fleet-manager-private.yaml)
status=0
echo "openapi-lint: spectral $("$dir/node_modules/.bin/spectral" --version) (spectral:oas)"
"$dir/node_modules/.bin/spectral" lint --ruleset "$here/.spectral.yaml" --fail-severity=warn "${specs[@]}" || status=1
echo "openapi-lint: redocly $("$dir/node_modules/.bin/redocly" --version 2>/dev/null) (recommended, warnings as errors)"
out=$("$dir/node_modules/.bin/redocly" lint --config "$here/redocly.yaml" --max-problems=1000 --format=stylish "${specs[@]}" 2>&1) || status=1
# Drop the banner Redocly prints about Node.js versions; it is no finding.
grep -v -e '^ *[║╔╚]' -e '^$' <<<"$out" || true
if [ $status != 0 ]; then
  echo "openapi-lint: the specs have findings; fix them in openapi/*.yaml" >&2
fi
exit $status
