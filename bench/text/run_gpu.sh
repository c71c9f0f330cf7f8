#!/bin/bash
# bench/text/run_gpu.sh — one call on the GPU machine: build the text bench
# with CUDA (bench_text_encode, the t5clip, quant and flux plugins,
# test_textcond_cuda), run test_textcond_cuda, then bench/text/bench_text.py: FLUX.1's
# T5-XXL + CLIP-L encode, transformers against orakul, bf16 and fp8, one JSON
# line per run in $OUT/text_bench.jsonl (logs beside it).
# Needs: torch + transformers + tokenizers (optimum-quanto or torchao for
# transformers' fp8 line, else it says skipped); the core's Debian deps as for
# bench/train/run_gpu.sh (.gpu-deps when the machine lacks them).
# Usage: bash bench/text/run_gpu.sh [N captions, default 256] [extra bench_text.py args]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
export PYTHONUNBUFFERED=1
n=${1:-256}; shift || true
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
B=$root/build-gpu
t0=$(date +%s)
cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release >"$OUT/text_build.log" 2>&1 &&
  cmake --build $B -j16 --target bench_text_encode orakul_plugin_t5clip orakul_plugin_quant orakul_plugin_flux \
    test_textcond_cuda >>"$OUT/text_build.log" 2>&1
rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { grep -E "error" "$OUT/text_build.log" | head -20; tail -20 "$OUT/text_build.log"; exit 1; }
(cd $B && timeout 300 ctest -R textcond_cuda --output-on-failure >"$OUT/textcond_cuda.log" 2>&1)
echo "== test_textcond_cuda rc=$?"; grep -E "max err/M|FAIL|asserts|tests passed" "$OUT/textcond_cuda.log" | head -20
t0=$(date +%s)
timeout 1500 python3 bench/text/bench_text.py --bin $B/bench/text/bench_text_encode --n "$n" --out "$OUT/text_bench.jsonl" "$@" \
  2>"$OUT/text_bench.log"
echo "== bench_text rc=$? in $(( $(date +%s) - t0 )) s"
cat "$OUT/text_bench.jsonl"
grep -E "error|text encode" "$OUT/text_bench.log" | head -20
