#!/bin/bash
# tests/reference/codec_old_path.sh [OUT] — regenerate
# tests/fixtures/codec_old_path.safetensors: build the revision before the
# codecs left the FLUX plugin (REV, default 26cb3c1) in a temporary folder,
# with tests/reference/codec_old_path.c beside its tests/vae, and run it: the
# FLUX plugin's own encode/decode (vae1, vae2, pixel, and taef1 when
# ../shared/assets/taef1 exists) on the CPU. tests/codecs/test_codecs.c runs
# the same through the codec components and compares bit for bit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-$root/tests/fixtures/codec_old_path.safetensors}")
rev=${REV:-26cb3c1}
if [ -n "${WORK:-}" ]; then work=$WORK; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
if [ ! -d "$work/src" ]; then
  mkdir -p "$work/src"
  git -C "$root" archive "$rev" | tar -x -C "$work/src"
  [ -d "$root/../shared" ] && ln -s "$(cd "$root/../shared" && pwd)" "$work/shared"
  cat >> "$work/src/tests/vae/CMakeLists.txt" <<'CM'
ork_add_test(codec_old_path SOURCES codec_old_path.c LABELS cpu)
add_dependencies(test_codec_old_path orakul_plugin_flux)
CM
fi
cp "$root/tests/reference/codec_old_path.c" "$work/src/tests/vae/"
cmake -S "$work/src" -B "$work/build" -DORAKUL_CUDA=OFF >/dev/null
cmake --build "$work/build" -j"${JOBS:-2}" --target test_codec_old_path >/dev/null
"$work/build/tests/vae/test_codec_old_path" "$out"
