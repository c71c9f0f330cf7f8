#!/bin/bash
# tools/check_commit_subjects.sh [RANGE] — lists the commits in RANGE (default:
# every commit after the one that introduced this check) whose subject line is
# 72 characters or longer, and exits 1 when there is one. .ci/run calls it;
# tools/git-hooks/commit-msg refuses such a commit before it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then range=$1
else
  first=$(git log --diff-filter=A --format=%H -- tools/check_commit_subjects.sh | tail -n 1)
  [ -n "$first" ] || { echo "check_commit_subjects: not committed yet: nothing to check"; exit 0; }
  range="$first..HEAD"
fi
bad=$(git log --format='%h %s' "$range" | awk '{s=$0; sub(/^[^ ]+ /, "", s); if (length(s) >= 72) print "  " $0}')
if [ -n "$bad" ]; then
  echo "check_commit_subjects: subject lines of 72 characters or more in $range:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check_commit_subjects: $(git rev-list --count "$range") commits in $range, every subject under 72 characters"
