#!/bin/bash
# bench/lokr/run_gpu.sh — LoKr's CUDA path on the GPU machine, in one device command
# (under 5 minutes): configure + build with CUDA (build-gpu/, kept while warm) the LoKr
# tests and what they run, then
#   lokr_op_cuda     the linear op with a LoKr adapter on the CUDA backend against the
#                    lycoris-lora fixtures (F32 and BF16 activations; tests/lokr)
#   lokr_train_cuda  orakul run with network.type: lokr on cuda:0: the loss falls,
#                    resume bit-identical, streamed == resident, fp8 base, factor 4,
#                    the refusal
# Logs in $OUT/lokr_*.log; one summary line per test on stdout.
# Usage (repo root; carry .gpu-deps): bash bench/lokr/run_gpu.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
B=$root/build-gpu
t_end=$(( $(date +%s) + ${LOKR_GPU_BUDGET_S:-280} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
    >'$OUT/lokr_build.log' 2>&1 && cmake --build $B -j16 --target test_lokr_op_cuda test_lokr_train_cuda \
    orakul orakul_plugin_flux orakul_plugin_mse orakul_plugin_adamw \
    orakul_plugin_quant >>'$OUT/lokr_build.log' 2>&1"
rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { grep -E "error" "$OUT/lokr_build.log" | head -20; tail -20 "$OUT/lokr_build.log"; exit 1; }
for t in lokr_op_cuda lokr_train_cuda; do
  t1=$(date +%s)
  (cd $B && timeout $(left) ctest -R "^$t\$" -V >"$OUT/lokr_$t.log" 2>&1)
  rc=$?
  echo "== $t rc=$rc in $(( $(date +%s) - t1 )) s"
  grep -E "rel err|loss:|FAIL|tests passed|Passed|Failed|\*\*\*" "$OUT/lokr_$t.log" | head -20
done
