#!/bin/bash
# bench/train/run_final.sh — the session's closing GPU call, cheapest and most
# decisive first: build, the gpu test suite, the AdamW-8bit step at 6e9
# parameters, the FLUX.1-dev forward bench, then FLUX.1-dev 1024² rank 128
# training (cuDNN SDPA forward where the loaded cuDNN has it) against
# torch_flux_ref.py. Logs under $OUT; everything is echoed as it finishes.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; root=$PWD
bash bench/train/run_gpu.sh build | tail -1
B=$root/build-gpu
export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
(cd $B && timeout 120 ctest -L gpu -j1 --output-on-failure > $OUT/ctest.log 2>&1; grep -E "Test +#|tests passed" $OUT/ctest.log)
t0=$(date +%s); timeout 45 $B/bench/adamw8bit/bench_adamw8bit 6e9 --steps 5 > $OUT/adam.log 2>&1; echo "== adamw8bit rc=$? $(( $(date +%s)-t0 ))s"; tail -2 $OUT/adam.log
t0=$(date +%s); timeout 60 $B/bench/flux/bench_flux_forward --preset flux1-dev --size 1024 --txt 512 --iters 2 > $OUT/fwd.log 2>&1
echo "== flux forward rc=$? $(( $(date +%s)-t0 ))s"; tail -6 $OUT/fwd.log
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
export ORK_CUDNN_SDPA=1 ORK_CUDNN_LIB=$whl/libcudnn.so.9
NO_TORCH=1 STEPS=${STEPS:-5} BUDGETS=0 TRAIN_TIMEOUT=130 timeout 140 bash bench/train/run_gpu.sh train 2>&1 | grep -v "NVIDIA\|build rc" | tail -10
t0=$(date +%s); timeout 60 python3 .carry/torch_flux_ref.py --preset dev --res 1024 --ranks 128 --steps ${STEPS:-5} > $OUT/torch.log 2>&1
echo "== torch rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $OUT/torch.log
