#!/bin/bash
# tests/plugin/check_exports.sh DIR|FILE... — every plugin given (a file, or
# every orakul-*.so in a directory) must export exactly one dynamic symbol,
# orakul_plugin_entry: hidden visibility plus the version script. Exit 1 on
# the first plugin that leaks anything else, naming it and the symbols.
set -u
n=0
for arg in "$@"; do
  if [ -d "$arg" ]; then files=("$arg"/orakul-*.so); else files=("$arg"); fi
  for f in "${files[@]}"; do
    [ -e "$f" ] || continue
    syms=$(nm -D --defined-only "$f" | awk '{print $NF}' | sort | tr '\n' ' ')
    if [ "$syms" != "orakul_plugin_entry " ]; then
      echo "FAIL $f exports: ${syms:-nothing}"
      exit 1
    fi
    echo "ok   $f"
    n=$((n + 1))
  done
done
[ "$n" -gt 0 ] || { echo "FAIL no plugin checked"; exit 1; }
echo "$n plugins export only orakul_plugin_entry"
