#!/bin/bash
# bench/emadop/run_gpu.sh — the EMA (train.ema_config) and DOP (train.diff_output_preservation)
# checks on the GPU machine, issue #32 points 4 and 5, in one device command (< 5 min):
#   build   configure + build with CUDA (build-gpu/, kept while warm): orakul, the flux, mse,
#           adamw and t5clip plugins, test_ema_cuda and test_dop_cuda
#   test    ctest ema_cuda (tests/ema on cuda:0: 4 straight == 2 + 2 resumed with the EMA,
#           F32 and BF16 weights; the trainable state streamed == resident with the EMA;
#           samples drawn with the EMA) and dop_cuda (tests/dop on cuda:0: the preservation
#           loss, the prior == the base model's prediction, multiplier 0 == no DOP, resume,
#           the refusals)
# Usage (repo root; carry .gpu-deps): bash bench/emadop/run_gpu.sh   (logs in $OUT)
# EMADOP_GPU_BUDGET_S (280 s) bounds both phases.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
B=$root/build-gpu
t_end=$(( $(date +%s) + ${EMADOP_GPU_BUDGET_S:-280} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
t0=$(date +%s)
timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
    >'$OUT/emadop_build.log' 2>&1 && cmake --build $B -j16 --target orakul orakul_plugin_flux orakul_plugin_mse \
    orakul_plugin_adamw orakul_plugin_t5clip test_ema_cuda test_dop_cuda >>'$OUT/emadop_build.log' 2>&1"
rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { grep -E "error" "$OUT/emadop_build.log" | head -20; tail -20 "$OUT/emadop_build.log"; exit 1; }
t0=$(date +%s)
(cd $B && timeout $(left) ctest -R "^(ema_cuda|dop_cuda)$" --output-on-failure >"$OUT/emadop_test.log" 2>&1)
rc=$?; echo "== ctest ema_cuda dop_cuda rc=$rc in $(( $(date +%s) - t0 )) s"
grep -E "Test:|FAILED|[0-9]+\. |asserts|tests passed|Passed|Failed|Not Run" "$OUT/emadop_test.log" | head -60
exit $rc
