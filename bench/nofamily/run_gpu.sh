#!/bin/bash
# bench/nofamily/run_gpu.sh — the GPU side of the nofamily helper's changes
# (#30 point 1: prompt templates as the model's data, select_hidden,
# orakul/hf_checkpoint.h in t5clip and llm), in one device command of under
# 5 minutes: builds with CUDA in build-gpu (kept while warm) the text-encoder
# plugins and their CUDA tests, and runs them:
#   textcond_cuda  the conditioner (T5 + CLIP slots, quantize_te, layer-major) in BF16
#   llm_cuda       Mistral3 / Qwen3 (hf_checkpoint.h resolution; select_hidden's
#                  slices of the checked stack) in BF16 on the GPU
#   t5clip_cuda    T5 / CLIP against transformers in BF16
# Logs in $OUT (build.log, ctest.log). Usage (repo root; carry .gpu-deps):
#   bash bench/nofamily/run_gpu.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
B=$root/build-gpu
t0=$(date +%s)
timeout 220 bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
    >'$OUT/build.log' 2>&1 && cmake --build $B -j16 --target orakul_plugin_t5clip orakul_plugin_llm orakul_plugin_quant \
    orakul_plugin_flux test_textcond_cuda test_llm_cuda test_t5clip_cuda >>'$OUT/build.log' 2>&1"
rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { grep -E "error" "$OUT/build.log" | head -20; tail -20 "$OUT/build.log"; exit 1; }
(cd "$B" && timeout 150 ctest -R "^(textcond_cuda|llm_cuda|t5clip_cuda)$" --output-on-failure >"$OUT/ctest.log" 2>&1)
rc=$?
grep -E "Test +#|tests passed|tests failed|select_hidden|Failed|FAIL" "$OUT/ctest.log" | head -40
echo "== ctest rc=$rc in $(( $(date +%s) - t0 )) s"
exit $rc
