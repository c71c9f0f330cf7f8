#!/bin/bash
# run_gpu.sh — one call on the GPU machine: build the CUDA backend (sm_90), run the
# gpu tests of tests/cuda (cuDNN SDPA first), then bench_ops and bench_torch.py; logs under $OUT.
# Needs .gpu-deps (../shared/tools/gpu-deps + jansson/webp/png/jpeg debs) carried.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export ORK_DEPS=$PWD/.gpu-deps/usr CMAKE_PREFIX_PATH=$PWD/.gpu-deps/usr
export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
# cuDNN for the fused SDPA path (opt-in, dlopen'd): the system's libcudnn.so.9 is
# 9.14 on this image (no SDPA backward node, which needs 9.17), so prefer the one
# PyTorch's wheel brings (nvidia-cudnn-*) when it is there; printed for the notes.
export ORK_CUDNN_SDPA=${ORK_CUDNN_SDPA:-1}
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
if [ -n "$whl" ] && [ -e "$whl/libcudnn.so.9" ]; then
  export ORK_CUDNN_LIB=$whl/libcudnn.so.9 LD_LIBRARY_PATH=$whl:$LD_LIBRARY_PATH
fi
echo "cudnn: system $(ldconfig -p | grep -o 'libcudnn.so.9 .*' | head -1); ORK_CUDNN_LIB=${ORK_CUDNN_LIB:-}" | tee -a "$OUT/gpu.txt"
# Build from a private copy holding only what these targets need, so that another
# area's half-written CMakeLists cannot stop the run.
src=/tmp/ork-src; rm -rf $src; mkdir -p $src
tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C $src
for d in $src/tests/* $src/bench/*; do case $d in */common|*/cuda|*/ops|*CMakeLists.txt) ;; *) rm -rf $d;; esac; done
rm -rf $src/plugins; cd $src
t0=$(date +%s)
cmake -S . -B build-gpu -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
  >"$OUT/build.log" 2>&1 && cmake --build build-gpu -j16 --target test_cuda_ops test_cuda_sdpa bench_ops >>"$OUT/build.log" 2>&1
rc=$?; echo "build rc=$rc in $(( $(date +%s) - t0 )) s"; grep -E "error|spill" "$OUT/build.log" | head -20
[ $rc -eq 0 ] || { tail -30 "$OUT/build.log"; exit 1; }
t0=$(date +%s)
timeout 200 build-gpu/tests/cuda/test_cuda_sdpa >"$OUT/test_sdpa.log" 2>&1; echo "test_sdpa rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "cuDNN|cudnn|plans|rel_l2|max\|d\||FAIL|passed|failed|asserts|skipped" "$OUT/test_sdpa.log" | head -60
t0=$(date +%s)
env ${OPS_QUICK:+ORK_TEST_QUICK=1} timeout 400 build-gpu/tests/cuda/test_cuda_ops >"$OUT/test.log" 2>&1; echo "test rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "bad=[1-9]|FAIL|Error|error|asserts|tests " "$OUT/test.log" | head -40
if [ -n "${SANITIZE:-}" ]; then for tool in memcheck racecheck; do t0=$(date +%s)
  ORK_TEST_QUICK=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/tests/cuda/test_cuda_ops \
    >"$OUT/san_$tool.log" 2>&1; echo "sanitizer $tool rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "ERROR SUMMARY|Race|Invalid" "$OUT/san_$tool.log" | head -5; done; fi
timeout 200 build-gpu/bench/ops/bench_ops ${1:-} >"$OUT/ours.jsonl" 2>"$OUT/bench_err.log"; echo "bench rc=$?"
cat "$OUT/bench_err.log" | head -5
PYTHONUNBUFFERED=1 timeout 200 python3 bench/ops/bench_torch.py "$OUT/ours.jsonl" >"$OUT/bench.txt" 2>&1; echo "torch rc=$?"
grep "sdpa backend" "$OUT/bench.txt"; sed -n '/^op/,$p' "$OUT/bench.txt"
