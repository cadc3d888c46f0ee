#!/usr/bin/env bash
# Fails when the committed generated code differs from what `make generate`
# would write from the current OpenAPI specs.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for cfg in pkg/api/*/oapi-codegen.yaml; do
  dir=$(dirname "$cfg")
  spec=$(sed -n 's|^//go:generate go tool oapi-codegen -config oapi-codegen.yaml \(.*\)$|\1|p' "$dir/generate.go")
  out=$(sed -n 's/^output: //p' "$cfg")
  sed "s|^output: .*|output: $tmp/$out|" "$cfg" >"$tmp/config.yaml"
  (cd "$dir" && go tool oapi-codegen -config "$tmp/config.yaml" "$spec")
  if ! diff -u "$dir/$out" "$tmp/$out" >"$tmp/diff"; then
    echo "check-generated: $dir/$out is stale; run 'make generate' and commit the result:" >&2
    head -n 40 "$tmp/diff" >&2
    status=1
  fi
done
[ $status = 0 ] && echo "check-generated: generated code is current"
exit $status
