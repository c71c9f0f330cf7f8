#!/bin/bash
# sdk/examples/check.sh PREFIX [CMAKE_ARG...] — build plugins against the orakul
# installed in PREFIX alone, as a third party would, and load them with the
# installed PREFIX/bin/orakul:
#   1. the example plugin (sdk/examples/l1), once with find_package(orakul) +
#      orakul_add_plugin() and once with plain cc + pkg-config; `orakul plugins
#      --keys` must document its keys;
#   2. every in-tree plugin (plugins/<kind>/<name>/ and plugins/<name>/), each
#      configured as a CMake project of its own with find_package(orakul)
#      (CMAKE_ARGs go to these, e.g. -DORAKUL_CUDA=OFF); `orakul plugins` must
#      load each from ORAKUL_PLUGIN_PATH (the same name shadows the installed
#      copy) and refuse none.
# Each .so must export only orakul_plugin_entry. Used by .ci/run and ctest.
set -euo pipefail
prefix=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
exports_only_entry() {
  local syms
  syms=$(nm -D --defined-only "$1" | awk '{print $NF}' | tr '\n' ' ')
  [ "$syms" = "orakul_plugin_entry " ] || fail "$1 exports: $syms"
}

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
  exports_only_entry "$so"
  out=$(ORAKUL_PLUGIN_PATH="$d" "$prefix/bin/orakul" plugins --keys 2>&1) || fail "orakul plugins: $out"
  for want in "$so" "org.example.l1 (alias: l1)" "reduction" "one of mean|sum" "multiplies the loss"; do
    grep -qF -- "$want" <<<"$out" || fail "orakul plugins --keys lacks '$want':
$out"
  done
  echo "ok: $so loads and documents its keys"
done

echo "== every in-tree plugin against the installed SDK alone"
jobs=$(nproc 2>/dev/null || echo 2)
out_dir="$work/plugins"
mkdir -p "$out_dir" "$work/build"
n=0
for dir in "$root"/plugins/*/ "$root"/plugins/*/*/; do
  dir=${dir%/}
  [ -f "$dir/CMakeLists.txt" ] || continue
  [ -f "$(dirname "$dir")/CMakeLists.txt" ] && continue   # a folder inside a plugin
  rel=${dir#"$root"/}
  b="$work/build/${rel//\//_}"
  cmake -S "$dir" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
        -DORAKUL_PLUGIN_BUILD_DIR="$out_dir" "$@" >"$b.log" 2>&1 \
    || { cat "$b.log" >&2; fail "$rel: configure against $prefix"; }
  cmake --build "$b" -j"$jobs" >>"$b.log" 2>&1 || { cat "$b.log" >&2; fail "$rel: build against $prefix"; }
  echo "ok: $rel builds"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no plugin under $root/plugins"
sos=("$out_dir"/orakul-*.so)
[ "${#sos[@]}" -eq "$n" ] || fail "$n plugin projects gave ${#sos[@]} .so files: ${sos[*]}"
out=$(ORAKUL_PLUGIN_PATH="$out_dir" "$prefix/bin/orakul" plugins 2>&1) || fail "orakul plugins refused one:
$out"
for so in "${sos[@]}"; do
  exports_only_entry "$so"
  grep -qF -- "$so" <<<"$out" || fail "orakul plugins did not load $so:
$out"
done
echo "ok: $n plugins built against $prefix load from ORAKUL_PLUGIN_PATH"
