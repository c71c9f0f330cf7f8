#!/bin/bash
# bench/house_ab.sh — "behaviour unchanged" across a refactor (issue #27), in one call on
# the GPU machine: the same short FLUX.1-dev-size run (bench/stream/run_gpu.sh's case,
# default f1:0 = 1024², rank 128, resident), built once from a base tree and once from
# this checkout, with the settings under which a run is bitwise repeatable (our own
# attention kernels, fp32 LoRA saves, no clipping: the `determ` phase of
# run_open_gpu.sh). Prints both runs' step lines, then compares the per-step losses and
# every saved tensor bitwise (cmp_safetensors.py; metadata keys that differ are listed).
# The base tree: `git archive <commit> | tar -x -C .carry/base` here, then carry .carry.
# Usage: bash bench/house_ab.sh [case ...]   (carry .gpu-deps and .carry)
set -u
OUT=${OUT:-/tmp/out}; root=$PWD; base=$root/.carry/base
[ -d "$base/core" ] || { echo "no base tree in $base"; exit 1; }
ln -sfn "$root/.gpu-deps" "$base/.gpu-deps"; ln -sfn "$root/.carry" "$base/.carry"
for c in "${@:-f1:0}"; do
  for side in base head; do
    dir=$root; [ $side = base ] && dir=$base
    echo "== $side ($c)"
    (cd "$dir" && ORK_CUDNN_SDPA=0 SAVE_DTYPE=fp32 MAX_GRAD_NORM=0 STEPS=${STEPS:-4} OUT=$OUT/$side \
       bash bench/stream/run_gpu.sh "$c") | grep -E "^==|^step|error|peak"
    rm -rf /tmp/ab_$side; mv /tmp/ork-bench/out /tmp/ab_$side
    m=$(find /tmp/ab_$side -name metrics.jsonl | head -1); grep -oE '"loss": *[^,]+' "$m" > /tmp/ab_$side.loss
  done
  echo "== $c: losses base vs head: $(cmp -s /tmp/ab_base.loss /tmp/ab_head.loss && echo identical || echo DIFFER); saved files:"
  paste /tmp/ab_base.loss /tmp/ab_head.loss
  python3 bench/stream/cmp_safetensors.py /tmp/ab_base /tmp/ab_head
done
