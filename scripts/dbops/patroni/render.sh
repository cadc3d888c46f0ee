#!/usr/bin/env bash
# Renders patroni.yml for one node: every ${PATRONI_...} placeholder of the
# template must be set, and not empty, in the environment; the result goes
# to stdout. Only those placeholders are replaced (perl, which every Debian
# has). The failover test checks this script renders what the test does.
#
#   PATRONI_CLUSTER=fleet-db PATRONI_NODE=db1 ... scripts/dbops/patroni/render.sh > /etc/patroni/config.yml
set -euo pipefail
template="$(dirname "$0")/patroni.yml"
missing=()
for name in $(grep -o '\${PATRONI_[A-Z_]*}' "$template" | tr -d '${}' | sort -u); do
  [ -n "${!name:-}" ] || missing+=("$name")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "render.sh: set ${missing[*]}" >&2
  exit 1
fi
exec perl -pe 's/\$\{(PATRONI_[A-Z_]+)\}/$ENV{$1}/g' "$template"
