#!/bin/bash
# tests/fuzz/run.sh — run every libFuzzer target of a fuzz build for a bounded
# time each, one after the other on one core (what .ci/run step 5 does):
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_EACH] [TARGET...]
# BUILD_DIR was configured with -DORAKUL_FUZZ=ON and clang and built with
# --target fuzz_all. SECONDS_EACH defaults to 60; TARGET names (fuzz_config, ...)
# default to every fuzz_* executable there. Each target starts from its
# committed seeds (tests/fuzz/corpus/<name without fuzz_>/) plus what earlier
# runs added to BUILD_DIR/fuzz-corpus/<name>/, with its dictionary
# (tests/fuzz/<name without fuzz_>.dict) when there is one, -rss_limit_mb=2048
# (memory growth past it is a finding) and -timeout=10 (one input taking
# longer is a finding). A finding stops that target: its input is kept in
# BUILD_DIR/fuzz-artifacts/, the report's last lines are printed, and the
# script goes on with the next target and exits 1 at the end.
# Reproduce a finding: BUILD_DIR/tests/fuzz/<target> <artifact file>
# (ORK_FUZZ_VERBOSE=1 prints the readers' log lines too).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS_EACH] [TARGET...]}
secs=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for exe in "$build"/tests/fuzz/fuzz_*; do
    [ -x "$exe" ] && [ -f "$exe" ] && targets+=("$(basename "$exe")")
  done
fi
[ ${#targets[@]} -gt 0 ] || { echo "run.sh: no fuzz_* targets in $build/tests/fuzz (build --target fuzz_all)" >&2; exit 2; }
mkdir -p "$build/fuzz-artifacts"
failed=()
for t in "${targets[@]}"; do
  exe="$build/tests/fuzz/$t"
  [ -x "$exe" ] || { echo "== fuzz: $t: not built" >&2; failed+=("$t"); continue; }
  name=${t#fuzz_}
  seeds="$here/corpus/$name"
  work="$build/fuzz-corpus/$name"
  mkdir -p "$work"
  args=(-max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
        -artifact_prefix="$build/fuzz-artifacts/$t-")
  [ -f "$here/$name.dict" ] && args+=(-dict="$here/$name.dict")
  corpora=("$work")
  [ -d "$seeds" ] && corpora+=("$seeds")
  log="$build/fuzz-artifacts/$t.log"
  echo "== fuzz: $t, ${secs} s"
  start=$SECONDS
  "$exe" "${args[@]}" "${corpora[@]}" >"$log" 2>&1
  rc=$?
  runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if [ $rc -ne 0 ]; then
    echo "== fuzz: $t FAILED (exit $rc after $((SECONDS - start)) s); the report ends:" >&2
    grep -v '^#[0-9]' "$log" | tail -40 >&2
    failed+=("$t")
  else
    echo "   ${runs:-?} inputs in $((SECONDS - start)) s, corpus $(ls "$work" | wc -l) files"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== fuzz: findings in ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
  exit 1
fi
echo "== fuzz: ${#targets[@]} targets, no findings"
