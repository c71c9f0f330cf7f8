#!/bin/bash
# bench/ops/attn_ab_gpu.sh — on the GPU machine, in one call of about two minutes: the
# flash attention kernels of this checkout (core/cuda/cuda_attn.cu) against a base
# tree's copy, bit for bit (attn_ab.cu), then, when build-gpu/ already holds them, the
# GPU tests that run the kernels (cuda_sdpa, cuda_ops). Logs in $OUT.
# Usage (repo root; carry .carry): bash bench/ops/attn_ab_gpu.sh [BASE_CUDA_ATTN_CU]
#   default base: .carry/base/core/cuda/cuda_attn.cu (the tree bench/house_ab.sh uses)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
base=${1:-$root/.carry/base/core/cuda/cuda_attn.cu}
[ -f "$base" ] || { echo "attn_ab: no base kernel file $base"; exit 1; }
T=$(mktemp -d)
F="-std=c++17 -O3 --use_fast_math -arch=sm_90 -I$root/core -I$root/sdk/include"
ren="-Dork_cuda_attn_fwd=ork_base_attn_fwd -Dork_cuda_attn_bwd=ork_base_attn_bwd -Dork_cuda_attn_ws=ork_base_attn_ws"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
# the base file compiled from a copy beside it so its "cuda/..." includes resolve to this tree's
cp "$base" "$T/cuda_attn_base.cu"
nvcc $F -c "$root/core/cuda/cuda_attn.cu" -o "$T/head.o" > "$OUT/attn_ab_build.log" 2>&1 &
nvcc $F $ren -c "$T/cuda_attn_base.cu" -o "$T/base.o" >> "$OUT/attn_ab_build.log" 2>&1 &
wait
nvcc $F "$root/bench/ops/attn_ab.cu" "$T/head.o" "$T/base.o" -o "$T/attn_ab" >> "$OUT/attn_ab_build.log" 2>&1 ||
  { tail -20 "$OUT/attn_ab_build.log"; exit 1; }
echo "attn_ab: built in $(( $(date +%s) - t0 )) s"
"$T/attn_ab" | tee "$OUT/attn_ab.log"
rc=${PIPESTATUS[0]}
if [ -f "$root/build-gpu/CMakeCache.txt" ]; then # a warm machine's build: brought up to date first
  [ -d "$root/.gpu-deps/usr" ] && export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  timeout 200 cmake --build "$root/build-gpu" -j16 --target test_cuda_sdpa test_cuda_ops > "$OUT/attn_ctest.log" 2>&1 &&
    timeout 150 ctest --test-dir "$root/build-gpu" -R "^(cuda_sdpa|cuda_ops)$" --output-on-failure >> "$OUT/attn_ctest.log" 2>&1
  tail -6 "$OUT/attn_ctest.log"
fi
rm -rf "$T"
exit $rc
