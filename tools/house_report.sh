#!/usr/bin/env bash
# tools/house_report.sh — how the tree is built, in numbers (issue #27): line counts per
# top-level folder and per core/ subfolder (code: C, CUDA, headers, CMake; docs: Markdown),
# the 10 largest code files of core/ and plugins/, and their 10 longest functions (the body's
# lines as universal-ctags gives its start and end). Reads committed trees only (git archive),
# so an uncommitted change elsewhere does not count.
#   tools/house_report.sh              # HEAD
#   tools/house_report.sh 6ef8226      # the base commit, then HEAD
# Needs git and universal-ctags (Debian: universal-ctags). Prints Markdown to stdout.
set -eu  # no pipefail: `head` closes the pipes it has read enough of

top=$(git rev-parse --show-toplevel)
cd "$top"
if ! ctags --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "house_report: universal-ctags is needed (apt-get install universal-ctags)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

code_re='\.(c|h|cu|cuh|cpp|hpp)$|(^|/)CMakeLists\.txt$|\.cmake$'

# lines <dir>: "<path>\t<lines>" for every code file and every .md file below dir
lines() {
  (cd "$1" && find . -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \
      -o -name '*.hpp' -o -name CMakeLists.txt -o -name '*.cmake' -o -name '*.md' \) -print0 |
    xargs -0 -r wc -l | grep -v ' total$' | awk '{ p = $2; sub(/^\.\//, "", p); print p "\t" $1 }')
}

report() { # report <label> <rev>
  local label=$1 rev=$2 dir="$tmp/$2"
  mkdir -p "$dir"
  git archive "$rev" | tar -x -C "$dir"
  local sha
  sha=$(git rev-parse --short "$rev")
  lines "$dir" > "$tmp/lines.$rev"
  echo "## $label ($sha, $(git log -1 --format=%cs "$rev"))"
  echo
  echo "Lines per top-level folder (code: .c .h .cu .cuh .cpp, CMake; docs: .md):"
  echo
  echo "| folder | code files | code lines | docs lines |"
  echo "| --- | ---: | ---: | ---: |"
  awk -F'\t' -v re="$code_re" '{
      n = split($1, part, "/"); top = n > 1 ? part[1] "/" : "(root)"
      if ($1 ~ /\.md$/) docs[top] += $2; else if ($1 ~ re) { code[top] += $2; files[top]++ }
      seen[top] = 1 }
    END { for (t in seen) printf "| %s | %d | %d | %d |\n", t, files[t], code[t], docs[t] }' \
    "$tmp/lines.$rev" | sort
  awk -F'\t' -v re="$code_re" '$1 ~ re { c += $2 } $1 ~ /\.md$/ { d += $2 }
    END { printf "| **all** | | **%d** | **%d** |\n", c, d }' "$tmp/lines.$rev"
  echo
  echo "core/ per subfolder (code lines):"
  echo
  echo "| core/ folder | files | lines |"
  echo "| --- | ---: | ---: |"
  awk -F'\t' -v re="$code_re" '$1 ~ /^core\// && $1 ~ re {
      n = split($1, part, "/"); sub_ = n > 2 ? part[2] "/" : "(core/ itself)"
      l[sub_] += $2; f[sub_]++ }
    END { for (s in l) printf "| %s | %d | %d |\n", s, f[s], l[s] }' "$tmp/lines.$rev" | sort
  echo
  echo "The 10 largest code files of core/ and plugins/:"
  echo
  echo "| lines | file |"
  echo "| ---: | --- |"
  awk -F'\t' -v re="$code_re" '($1 ~ /^(core|plugins)\//) && $1 ~ re { printf "%d\t%s\n", $2, $1 }' \
    "$tmp/lines.$rev" | sort -t$'\t' -k1,1nr -k2 | head -10 | awk -F'\t' '{ printf "| %d | %s |\n", $1, $2 }'
  echo
  echo "The 10 longest functions of core/ and plugins/ (lines from the signature to the closing brace):"
  echo
  echo "| lines | function | file:line |"
  echo "| ---: | --- | --- |"
  (cd "$dir" && find core plugins -type f \( -name '*.c' -o -name '*.cu' -o -name '*.cpp' \) -print0 2>/dev/null |
    xargs -0 -r ctags -f - --langmap=C++:+.cu --kinds-C=f --kinds-C++=f --fields=+ne 2>/dev/null) |
    awk -F'\t' '{ line = 0; end = 0
        for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) line = substr($i, 6) + 0; if ($i ~ /^end:/) end = substr($i, 5) + 0 }
        if (line && end) printf "%d\t%s\t%s:%d\n", end - line + 1, $1, $2, line }' |
    sort -t$'\t' -k1,1nr -k3 | head -10 | awk -F'\t' '{ printf "| %d | %s | %s |\n", $1, $2, $3 }'
  echo
}

echo "# orakul in numbers ($(date -u +%Y-%m-%d), tools/house_report.sh${1:+ $1})"
echo
if [ $# -ge 1 ]; then
  report "Base" "$(git rev-parse --verify "$1^{commit}")"
fi
report "HEAD" "$(git rev-parse HEAD)"
