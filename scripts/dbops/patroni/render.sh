#!/usr/bin/env bash
# Renders patroni.yml for one node: every ${PATRONI_...} variable of the
# template must be set (and not empty) in the environment; the result goes
# to stdout. The failover test renders the template the same way.
#
#   PATRONI_CLUSTER=fleet-db PATRONI_NODE=db1 ... scripts/dbops/patroni/render.sh > /etc/patroni/config.yml
set -euo pipefail
template="$(dirname "$0")/patroni.yml"
vars=$(grep -o '\${PATRONI_[A-Z_]*}' "$template" | sort -u)
missing=()
for v in $vars; do
  name=${v:2:-1}
  [ -n "${!name:-}" ] || missing+=("$name")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "render.sh: set ${missing[*]}" >&2
  exit 1
fi
envsubst "$(echo $vars)" < "$template"
