#!/bin/bash
# sdk/examples/check.sh PREFIX — build the example plugin (sdk/examples/l1)
# against the orakul installed in PREFIX, once with find_package(orakul) +
# orakul_add_plugin() and once with plain cc + pkg-config, then check that
# each exports only orakul_plugin_entry and that PREFIX/bin/orakul loads it
# from ORAKUL_PLUGIN_PATH and documents its keys. Used by .ci/run and ctest.
set -euo pipefail
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== CMake package: find_package(orakul) + orakul_add_plugin"
cmake -S "$here/l1" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null

echo "== plain cc + pkg-config"
pc=$(find "$prefix" -name orakul-sdk.pc -print -quit)
[ -n "$pc" ] || fail "no orakul-sdk.pc under $prefix"
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p "$work/pc"
# shellcheck disable=SC2046
cc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC $(pkg-config --cflags orakul-sdk) \
   -Wl,--version-script="$(pkg-config --variable=mapfile orakul-sdk)" -Wl,-z,defs \
   -o "$work/pc/orakul-example_l1.so" "$here/l1/l1.c"

for d in "$work/cmake" "$work/pc"; do
  so="$d/orakul-example_l1.so"
  [ -f "$so" ] || fail "$so was not built"
  syms=$(nm -D --defined-only "$so" | awk '{print $NF}' | tr '\n' ' ')
  [ "$syms" = "orakul_plugin_entry " ] || fail "$so exports: $syms"
  out=$(ORAKUL_PLUGIN_PATH="$d" "$prefix/bin/orakul" plugins --keys 2>&1) || fail "orakul plugins: $out"
  for want in "$so" "org.example.l1 (alias: l1)" "reduction" "one of mean|sum" "multiplies the loss"; do
    grep -qF -- "$want" <<<"$out" || fail "orakul plugins --keys lacks '$want':
$out"
  done
  echo "ok: $so loads and documents its keys"
done
