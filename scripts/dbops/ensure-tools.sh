#!/usr/bin/env bash
# Makes sure the database operators' tools the tests drive are installed,
# from Debian's packages: pgBackRest (backups, point-in-time recovery),
# Patroni (failover; its Python client for etcd's v3 API comes with it) and
# etcd (Patroni's store; the test hub uses it too). Installing a Debian server
# package may enable a system service; the tests never use one: they start
# their own instances on free loopback ports with their own folders.
#
#   scripts/dbops/ensure-tools.sh        install what is missing, quietly
set -euo pipefail

missing=()
command -v pgbackrest >/dev/null || missing+=(pgbackrest)
command -v patroni >/dev/null || missing+=(patroni)
command -v etcd >/dev/null || missing+=(etcd-server)
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
echo "installing ${missing[*]} from Debian's packages" >&2
$sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
  { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
for tool in pgbackrest patroni etcd; do
  command -v "$tool" >/dev/null || { echo "ensure-tools.sh: $tool is still missing" >&2; exit 1; }
done
