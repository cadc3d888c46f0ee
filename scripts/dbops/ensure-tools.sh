#!/usr/bin/env bash
# Makes sure the operators' tools the tests drive are installed, from
# Debian's packages: pgBackRest (backups, point-in-time recovery), Patroni
# (failover; its Python client for etcd's v3 API comes with it), etcd
# (Patroni's store; the test hub uses it too) and Prometheus with promtool
# (the user-facing metrics' backend and clients, internal/promtest). Installing
# a Debian server package may enable a system service; the tests never use
# one: they start their own instances on free loopback ports with their own
# folders. Where no policy-rc.d says otherwise, the install runs with one that
# refuses every start, so that no system Prometheus (port 9090) starts.
#
#   scripts/dbops/ensure-tools.sh        install what is missing, quietly
set -euo pipefail

missing=()
command -v pgbackrest >/dev/null || missing+=(pgbackrest)
command -v patroni >/dev/null || missing+=(patroni)
command -v etcd >/dev/null || missing+=(etcd-server)
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
# invoke-rc.d asks /usr/sbin/policy-rc.d whether a package may start its
# service; exit status 101 says no. A policy already there is kept.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
echo "installing ${missing[*]} from Debian's packages" >&2
$sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
  { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
for tool in pgbackrest patroni etcd prometheus promtool; do
  command -v "$tool" >/dev/null || { echo "ensure-tools.sh: $tool is still missing" >&2; exit 1; }
done
