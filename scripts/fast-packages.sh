#!/usr/bin/env bash
# Prints the import paths of the packages whose tests need no server: those
# whose test binary links none of the harnesses below, directly or through
# another package. `make test/fast` runs them; `make test` runs every package.
#
#   scripts/fast-packages.sh            the fast packages, one a line
#   scripts/fast-packages.sh --explain  every package with tests, fast or slow,
#                                       and for a slow one the harnesses it links
#
# A package without test files is in neither list. A package that links a
# harness in one test file only is slow all the same: go test builds one test
# binary per package.
#
# It fails when a harness below no longer exists (renamed or moved: its
# dependents would turn fast) and when a library package that starts child
# processes (it imports internal/childproc) is not listed below.
set -euo pipefail
cd "$(dirname "$0")/.."

# The server harnesses, in one place: the packages that start a server or
# connect to one, or run a program `make test/binaries` caches in
# ~/.cache/fleet-manager ($FLEET_MANAGER_CACHE). Paths are relative to the
# module.
harnesses=(
  # PostgreSQL at FLEET_MANAGER_TEST_DB_HOST:_PORT (127.0.0.1:5432 by
  # default), and servers of its own from PostgreSQL's binaries.
  internal/postgres/pgtest
  # the test hub: etcd and kube-apiserver, cached in hub-bin/.
  internal/hub/hubtest
  # open-cluster-management's hub controllers (cached ocm-<version>/) on a
  # hubtest hub, and a second control plane as the managed cluster.
  internal/hub/ocmtest
  # the governance-policy-propagator (cached governance-<version>/) beside
  # ocmtest's controllers.
  internal/hub/governancetest
  # installer-validator, the OpenShift installer's checks (cached).
  internal/hub/installertest
  # Ory Hydra, the OIDC issuer (cached hydra/).
  internal/oidc/hydratest
  # Prometheus (`prometheus` on the PATH) and the cached promtool.
  internal/promtest
  # BIND 9's named and Knot DNS's knotd as RFC 2136 primaries.
  internal/dnstest
  # builds the fleet-manager binary and gives the flags that point it at a
  # test database and issuer: what the end-to-end tests run.
  internal/e2e/e2estack
)

case "${1:-}" in
  "" | --explain) ;;
  *) echo "usage: scripts/fast-packages.sh [--explain]" >&2; exit 2 ;;
esac

module=$(go list -m)

# One line a package: "<path> <name> <imports...> | <deps...>" for each
# package of the module, its test variants ("p [p.test]", "p_test [p.test]",
# skipped) and its test binary ("p.test main ... | <every package it links>",
# some followed by a "[p.test]" token), when it has tests.
listing=$(go list -test -f '{{.ImportPath}} {{.Name}} {{join .Imports " "}} | {{join .Deps " "}}' ./...)

printf '%s\n' "$listing" | awk -v module="$module" -v harnesses="${harnesses[*]}" -v explain="${1:-}" '
  BEGIN {
    n = split(harnesses, list, " ")
    for (i = 1; i <= n; i++) harness[module "/" list[i]] = 1
    childproc = module "/internal/childproc"
    failed = 0
  }
  $2 ~ /^\[/ { next }
  {
    path = $1; name = $2
    sep = 0
    for (i = 3; i <= NF; i++) if ($i == "|") { sep = i; break }
    if (path ~ /\.test$/ && name == "main") {
      pkg = substr(path, 1, length(path) - 5)
      linked = ""
      if (pkg in harness) linked = " " pkg
      for (i = sep + 1; i <= NF; i++) if ($i in harness && index(linked " ", " " $i " ") == 0) linked = linked " " $i
      slow[pkg] = linked
      order[++count] = pkg
      next
    }
    exists[path] = 1
    if (name == "main" || path == childproc || path in harness) next
    for (i = 3; i < sep; i++) if ($i == childproc) {
      printf "scripts/fast-packages.sh: %s starts child processes (it imports internal/childproc) but is not among the harnesses: add it to harnesses, saying which server it starts, or stop it importing childproc\n", substr(path, length(module) + 2) > "/dev/stderr"
      failed = 1
    }
  }
  END {
    for (h in harness) if (!(h in exists)) {
      printf "scripts/fast-packages.sh: the harness %s does not exist: update harnesses to its new path\n", substr(h, length(module) + 2) > "/dev/stderr"
      failed = 1
    }
    if (failed) exit 1
    for (i = 1; i <= count; i++) {
      pkg = order[i]
      if (explain == "--explain") {
        if (slow[pkg] == "") print "fast " pkg
        else { s = slow[pkg]; gsub(" " module "/", " ", s); print "slow " pkg " (links" s ")" }
      } else if (slow[pkg] == "") print pkg
    }
  }
'
