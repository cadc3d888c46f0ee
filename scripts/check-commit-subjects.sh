#!/usr/bin/env bash
# Fails when a commit after the one that added this script has a subject
# longer than 72 characters (CONTRIBUTING.md: an imperative subject of at
# most 72 characters, a blank line, then the why and the figures). Earlier
# history is left as it is. In a shallow clone that lacks the adding commit,
# only HEAD is checked.
set -euo pipefail
cd "$(dirname "$0")/.."
max=${MAX_SUBJECT:-72}
self=scripts/check-commit-subjects.sh
added=$(git log --diff-filter=A --format=%H -- "$self" | tail -n 1)
if [ -n "$added" ]; then
  range="$added..HEAD"
else
  range="HEAD -1"
fi
bad=0
# shellcheck disable=SC2086
while IFS=$'\t' read -r sha subject; do
  if [ "${#subject}" -gt "$max" ]; then
    echo "check-commit-subjects: ${sha:0:12} has a subject of ${#subject} characters (at most $max): $subject" >&2
    bad=1
  fi
done < <(git log --format=$'%H\t%s' $range)
[ $bad = 0 ] && echo "check-commit-subjects: every subject since ${added:0:12} is at most $max characters"
exit $bad
