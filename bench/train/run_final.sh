#!/bin/bash
# bench/train/run_final.sh — the session's closing GPU call: build, the gpu test
# suite, FLUX.1-dev 1024² rank 128 training (cuDNN SDPA forward where the loaded
# cuDNN has it) against torch_flux_ref.py, the FLUX.1-dev forward bench, the
# AdamW-8bit step at 6e9 parameters and the quantizer's CUDA dequantize. Logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; root=$PWD
bash bench/train/run_gpu.sh build | tail -1
B=$root/build-gpu
export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
(cd $B && timeout 100 ctest -L gpu -j1 > $OUT/ctest.log 2>&1; grep -E "Test +#|tests passed" $OUT/ctest.log)
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
export ORK_CUDNN_SDPA=1 ORK_CUDNN_LIB=$whl/libcudnn.so.9
NO_TORCH=1 STEPS=${STEPS:-6} BUDGETS=0 TRAIN_TIMEOUT=170 timeout 200 bash bench/train/run_gpu.sh train 2>&1 | grep -v "NVIDIA\|build rc" | tail -12
# the same run with FP8 E4M3 frozen weights (qfloat8): weight memory and step time
sed -e "s#@RANK@#128#g" -e "s#@OUT@#/tmp/ork-q8#" -e "s#@DS@#/tmp/ork-bench/ds#" -e "s#@STEPS@#4#" -e "s#@BUDGET@#0#" \
    -e "s#@TAEF1@#$root/.carry/taef1#" -e "s#        arch: flux#        arch: flux\n        quantize: true\n        qtype: qfloat8#" \
    bench/train/flux1_dev_1024.yaml.in > /tmp/q8.yaml
t0=$(date +%s); timeout 170 $B/bin/orakul run /tmp/q8.yaml > $OUT/train_q8.log 2>&1
echo "== orakul FLUX.1-dev qfloat8 rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^step|error|peak|weights" $OUT/train_q8.log | tail -6
t0=$(date +%s); timeout 100 python3 .carry/torch_flux_ref.py --preset dev --res 1024 --ranks 128 --steps ${STEPS:-6} > $OUT/torch.log 2>&1
echo "== torch rc=$? $(( $(date +%s)-t0 ))s"; tail -1 $OUT/torch.log
t0=$(date +%s); timeout 90 $B/bench/flux/bench_flux_forward --preset flux1-dev --size 1024 --txt 512 --iters 3 > $OUT/fwd.log 2>&1
echo "== flux forward rc=$? $(( $(date +%s)-t0 ))s"; tail -6 $OUT/fwd.log
t0=$(date +%s); timeout 60 $B/bench/adamw8bit/bench_adamw8bit 6e9 --steps 5 > $OUT/adam.log 2>&1; echo "== adamw8bit rc=$? $(( $(date +%s)-t0 ))s"; tail -3 $OUT/adam.log
t0=$(date +%s); timeout 40 $B/bench/quant/bench_quant speed 3 > $OUT/quant.log 2>&1; echo "== quant rc=$? $(( $(date +%s)-t0 ))s"; tail -8 $OUT/quant.log
