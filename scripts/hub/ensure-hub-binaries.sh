#!/usr/bin/env bash
# Makes sure one folder holds the binaries of a test hub, etcd and
# kube-apiserver (the layout controller-runtime's envtest wants too), and
# prints the folder on stdout; progress goes to stderr:
#
#   HUB_BIN_DIR=$(scripts/hub/ensure-hub-binaries.sh)
#   KUBEBUILDER_ASSETS=$(scripts/hub/ensure-hub-binaries.sh)
#
# etcd is Debian's etcd-server (installed when missing, by
# scripts/dbops/ensure-tools.sh, which leaves its system service disabled)
# linked into the folder; kube-apiserver is built from the Go module proxy by
# build-kube-apiserver.sh (minutes cold: it prints how many first). When both
# are there it takes well under a second.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
OUT=${HUB_BIN_DIR:-${FLEET_MANAGER_CACHE:-$HOME/.cache/fleet-manager}/hub-bin}
mkdir -p "$OUT"

# etcd: keep one already in the folder (say a newer build), else link the
# system one, installing the Debian package when there is none.
if [ ! -x "$OUT/etcd" ]; then
  etcd_bin=$(command -v etcd || true)
  if [ -z "$etcd_bin" ]; then
    "$here/../dbops/ensure-tools.sh" >&2
    etcd_bin=$(command -v etcd || echo /usr/bin/etcd)
  fi
  ln -sfn "$etcd_bin" "$OUT/etcd"
fi
"$OUT/etcd" --version >/dev/null

"$here/build-kube-apiserver.sh" "$OUT" >&2

echo "$OUT"
