#!/usr/bin/env bash
# Makes sure the operators' tools the tests drive are installed, from
# Debian's packages: pgBackRest (backups, point-in-time recovery), Patroni
# (failover; its Python client for etcd's v3 API comes with it), etcd
# (Patroni's store; the test hub uses it too), Prometheus with promtool
# (the user-facing metrics' backend and clients, internal/promtest), BIND 9's
# named and Knot's knotd (the RFC 2136 DNS servers the DNS providers are tested
# against, internal/dnstest). Installing a Debian server package may enable a
# system service; the tests never use one: they start their own instances on
# free loopback ports with their own folders. Where no policy-rc.d says
# otherwise, the install runs with one that refuses every start, so that no
# system etcd (ports 2379, 2380), Prometheus (port 9090), Patroni (port
# 8008), named or knotd (port 53) starts; the units of the packages it installs are disabled too,
# so that no later boot starts them. Run again, it changes nothing.
#
#   scripts/dbops/ensure-tools.sh        install what is missing, quietly
set -euo pipefail

missing=()
command -v pgbackrest >/dev/null || missing+=(pgbackrest)
command -v patroni >/dev/null || missing+=(patroni)
command -v etcd >/dev/null || missing+=(etcd-server)
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } || missing+=(prometheus)
# named and knotd are in /usr/sbin, which an ordinary user's PATH may lack.
[ -x /usr/sbin/named ] || command -v named >/dev/null || missing+=(bind9)
[ -x /usr/sbin/knotd ] || command -v knotd >/dev/null || missing+=(knot)
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
# etcd-server, prometheus, bind9, knot and patroni enable their units; disable them
# (systemctl works without a running systemd) and stop one that a permissive
# policy let start. Disabling a disabled unit, or stopping a stopped one,
# does nothing.
for pkg_unit in etcd-server:etcd prometheus:prometheus bind9:named knot:knot patroni:patroni; do
  [[ " ${missing[*]} " == *" ${pkg_unit%%:*} "* ]] || continue
  unit=${pkg_unit#*:}
  if command -v systemctl >/dev/null; then
    $sudo systemctl disable "$unit.service" >/dev/null 2>&1 || true
    [ -d /run/systemd/system ] && { $sudo systemctl stop "$unit.service" >/dev/null 2>&1 || true; }
  else
    $sudo update-rc.d "$unit" disable >/dev/null 2>&1 || true
  fi
  [ -d /run/systemd/system ] || [ ! -x "/etc/init.d/$unit" ] || { $sudo "/etc/init.d/$unit" stop >/dev/null 2>&1 || true; }
done
PATH="$PATH:/usr/sbin"
for tool in pgbackrest patroni etcd prometheus promtool named knotd; do
  command -v "$tool" >/dev/null || { echo "ensure-tools.sh: $tool is still missing" >&2; exit 1; }
done
