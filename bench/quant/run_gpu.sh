#!/bin/bash
# bench/quant/run_gpu.sh — one call on the GPU machine for the quantized linear's
# CUDA paths: build the quant targets (sm_90) from a private copy, run the native
# FP8 GEMM test (path (b) vs (a) on FLUX shapes, an ops->linear training step),
# `bench_quant gemm`, the `orakul run` test with fp8_gemm: native, then the other
# quant tests; logs under $OUT.
# Usage: bash bench/quant/run_gpu.sh [source dir, default .]   Carry: .gpu-deps
# (and the source dir when it is an ignored snapshot).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
srcdir=$(cd "${1:-.}" && pwd)
export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$OUT/gpu.txt"
# A private copy holding only what these targets need, so that another area's
# half-written CMakeLists cannot stop the run.
src=/tmp/ork-src-quant; rm -rf $src; mkdir -p $src
(cd "$srcdir" && tar --exclude='./build*' --exclude=./.git --exclude='./.carry*' --exclude=./.gpu-deps -cf - .) | tar -xf - -C $src
for d in $src/tests/* $src/bench/*; do
  case $d in */common|*/quant|*/quant_train|*/train|*CMakeLists.txt) ;; *) rm -rf $d;; esac
done
rm -rf $src/plugins/losses/perceptual
cd $src
t0=$(date +%s)
cmake -S . -B build-gpu -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
  >"$OUT/build.log" 2>&1 && cmake --build build-gpu -j$(nproc) --target test_quant_fp8_gemm test_quant_fp8_train \
  test_quant_fp8_cfg test_quant test_quant_cuda bench_quant >>"$OUT/build.log" 2>&1
rc=$?; echo "build rc=$rc in $(( $(date +%s) - t0 )) s"; grep -E "error|warning" "$OUT/build.log" | head -20
[ $rc -eq 0 ] || { tail -30 "$OUT/build.log"; exit 1; }
T=build-gpu/tests/quant
run() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$(date +%s)
  (cd $T && timeout $to "$@") >"$OUT/$n.log" 2>&1; echo "== $n rc=$? in $(( $(date +%s) - t0 )) s"
}
run fp8_gemm ${GEMM_TIMEOUT:-55} ./test_quant_fp8_gemm
grep -E "M=|training step|fallback|unavailable|taken|refused|FAIL|\.c:[0-9]|asserts|tests " "$OUT/fp8_gemm.log" | head -60
t0=$(date +%s)
timeout ${BENCH_TIMEOUT:-30} build-gpu/bench/quant/bench_quant gemm ${REPS:-5} >"$OUT/bench_gemm.txt" 2>&1
echo "== bench_quant gemm rc=$? in $(( $(date +%s) - t0 )) s"; grep -v "plugin quant" "$OUT/bench_gemm.txt"
run fp8_train ${TRAIN_TIMEOUT:-45} ./test_quant_fp8_train
grep -E "step-1|fallback|exit|FAIL|\.c:[0-9]|asserts|tests " "$OUT/fp8_train.log" | head -20
for t in test_quant_cuda test_quant test_quant_fp8_cfg; do
  run $t 10 ./$t; grep -E "FAIL|\.c:[0-9]|asserts" "$OUT/$t.log" | head -5
done
