#!/usr/bin/env bash
# Lints the three OpenAPI specs with Spectral (spectral:oas) and Redocly
# (recommended), at the versions package-lock.json pins, and fails on any
# warning. The linters are installed with `npm ci` into
# ~/.cache/fleet-manager/openapi-lint/<hash of the lock file>, once per lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lock_hash=$(sha256sum "$here/package-lock.json" | cut -c1-16)
dir=${OPENAPI_LINT_DIR:-$HOME/.cache/fleet-manager/openapi-lint/$lock_hash}
if [ ! -x "$dir/node_modules/.bin/spectral" ] || [ ! -x "$dir/node_modules/.bin/redocly" ]; then
  echo "openapi-lint: installing the pinned linters into $dir (npm ci, once per package-lock.json)" >&2
  mkdir -p "$dir"
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --cache "$HOME/.cache/fleet-manager/npm")
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
