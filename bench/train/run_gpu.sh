#!/bin/bash
# bench/train/run_gpu.sh — one call on the GPU machine: build everything with CUDA,
# run the gpu test suite, the quickstart on the GPU, bitsandbytes vs our AdamW-8bit,
# then the FLUX.1-dev-size training step against torch_flux_ref.py.
# Carry: .gpu-deps, .whl (bitsandbytes), .carry (torch_flux_ref.py, taef1/).
# Usage: bash bench/train/run_gpu.sh [build|tests|train|all]   (logs under $OUT)
set -u
what=${1:-all}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
B=$root/build-gpu
t0=$(date +%s)
cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
  cmake --build $B -j16 >>"$OUT/build.log" 2>&1
rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { grep -E "error" "$OUT/build.log" | head -20; tail -20 "$OUT/build.log"; exit 1; }
[ "$what" = build ] && exit 0

if [ "$what" = all ] || [ "$what" = tests ]; then
  t0=$(date +%s)
  (cd $B && timeout 300 ctest -L gpu --output-on-failure -j1 >"$OUT/ctest_gpu.log" 2>&1); echo "== ctest -L gpu rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "tests passed|Passed|Failed|\*\*\*|mismatch" "$OUT/ctest_gpu.log" | head -40
  # the quickstart on the GPU
  sed -e 's/device: cpu/device: cuda:0/' -e 's#training_folder: output#training_folder: /tmp/qs-gpu#' configs/quickstart.yaml > /tmp/qs_gpu.yaml
  t0=$(date +%s); timeout 200 $B/bin/orakul run /tmp/qs_gpu.yaml >"$OUT/quickstart_gpu.log" 2>&1
  echo "== quickstart on cuda rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "step (1|100|200|300)/|error|peak" "$OUT/quickstart_gpu.log" | head
  # bitsandbytes
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
    lib=$(find $B -name 'liborakul_optim_ctypes.so' | head -1)
    t0=$(date +%s); timeout 200 python3 tests/reference/adamw8bit_vs_bnb.py --lib "$lib" --steps 100 --out "$OUT" >"$OUT/bnb.log" 2>&1
    echo "== bnb rc=$? in $(( $(date +%s) - t0 )) s"; tail -25 "$OUT/bnb.log"
  fi
fi

if [ "$what" = all ] || [ "$what" = train ]; then
  ds=/tmp/ork-bench/ds; mkdir -p $ds
  python3 -c "from PIL import Image; Image.open('assets/photos/astronaut.png').convert('RGB').resize((1024,1024), Image.BICUBIC).save('$ds/astronaut.png')"
  echo "an astronaut" > $ds/astronaut.txt
  for r in ${RANKS:-128}; do
   for bud in ${BUDGETS:-0}; do
    rm -rf /tmp/ork-bench/out
    sed -e "s#@RANK@#$r#g" -e "s#@OUT@#/tmp/ork-bench/out#" -e "s#@DS@#$ds#" -e "s#@STEPS@#${STEPS:-8}#" \
        -e "s#@BUDGET@#$bud#" -e "s#@TAEF1@#$root/.carry/taef1#" bench/train/flux1_dev_1024.yaml.in > /tmp/b$r.yaml
    t0=$(date +%s); timeout ${TRAIN_TIMEOUT:-300} $B/bin/orakul run /tmp/b$r.yaml >"$OUT/train_r${r}_b$bud.log" 2>&1
    echo "== orakul FLUX.1-dev 1024² rank $r budget $bud GiB rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "^step|error|peak|LoRA:|model |streaming" "$OUT/train_r${r}_b$bud.log" | tail -14
   done
   if [ -z "${NO_TORCH:-}" ]; then
    t0=$(date +%s); timeout 240 python3 .carry/torch_flux_ref.py --preset dev --res 1024 --ranks $r --steps ${STEPS:-8} >"$OUT/torch_r$r.log" 2>&1
    echo "== torch_flux_ref rank $r rc=$? in $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/torch_r$r.log"
   fi
  done
fi
