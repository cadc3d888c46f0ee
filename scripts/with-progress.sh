#!/usr/bin/env bash
# Runs a long command (a first build) and prints a line to stderr every
# PROGRESS_INTERVAL seconds (default 30) while it runs, so that no build is
# silent for minutes; a command that ends sooner prints nothing more. Exits
# with the command's status.
#
#   scripts/with-progress.sh "building kube-apiserver" go build ...
set -uo pipefail
label=$1
shift
interval=${PROGRESS_INTERVAL:-30}
start=$(date +%s)
"$@" &
pid=$!
(
  while sleep "$interval"; do
    kill -0 "$pid" 2>/dev/null || exit 0
    elapsed=$(($(date +%s) - start))
    printf '%s: still at work, %dm%02ds so far\n' "$label" $((elapsed / 60)) $((elapsed % 60)) >&2
  done
) &
ticker=$!
# A background command of a script ignores Ctrl-C: pass it on.
trap 'kill "$pid" "$ticker" 2>/dev/null; exit 130' INT TERM
wait "$pid"
status=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
exit $status
