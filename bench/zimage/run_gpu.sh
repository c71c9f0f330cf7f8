#!/bin/bash
# bench/zimage/run_gpu.sh — Z-Image on the GPU machine, in one call under 5 minutes:
#   build  configure + build with CUDA in build-gpu/ (orakul, the zimage, image codec,
#          mse, adamw plugins, bench_zimage_check)
#   check  the plugin's forward and backward at the REAL shape (6.15 G parameters,
#          random BF16 weights, 512², 256 caption tokens, two rank-32 LoRAs) against
#          diffusers 0.42.1: orakul's max and mean error against diffusers in float32,
#          next to diffusers' own bf16-vs-float32 error (bench/zimage/zimage_gpu_check.py);
#          diffusers (and importlib_metadata, zipp; huggingface_hub only if the image's is
#          too old) installed from .carry/wheels (pip download diffusers==0.42.1
#          importlib_metadata zipp huggingface_hub --no-deps -d .carry/wheels) into a
#          temporary PYTHONPATH
#   step   a LoRA step at 1024² (4096 image + 512 caption tokens), rank 32, AdamW, bf16:
#          orakul run of preset:zimage-turbo (random weights; TAEF1 latents from
#          .carry/taef1 or .carry/shared/assets/taef1; zero caption embeddings) — the
#          median s/it of steps 3..STEPS from its progress lines — then
#          bench/zimage/torch_zimage_ref.py eager and with torch.compile per block, in
#          the same call (warm-up 2, median of the timed steps); then, with time left,
#          orakul again within a 12 GiB VRAM budget (BUDGET2; the plan streams blocks)
# One JSON line per result in $OUT/zimage_gpu.jsonl; logs in $OUT.
# Usage (repo root; carry .gpu-deps and .carry): bash bench/zimage/run_gpu.sh [build] [check] [step]
# (default: all three). One deadline, ZIMAGE_GPU_BUDGET_S (290 s) from the start; a phase
# past it is cut (timeout) and says so.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
export PYTHONUNBUFFERED=1
phases=""
for a in "$@"; do case $a in build|check|step) phases="$phases $a";; esac; done
[ -n "$phases" ] || phases="build check step"
B=$root/build-gpu
J=$OUT/zimage_gpu.jsonl
t_end=$(( $(date +%s) + ${ZIMAGE_GPU_BUDGET_S:-290} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
# the wheels and TAEF1: in this tree's .carry, or beside it when the script runs in a
# committed copy at .carry/head (bench/run_open_gpu.sh's convention)
W=$root/.carry/wheels; [ -d "$W" ] || W=$root/../wheels
pylib() {
  local lib=${TMPDIR:-/tmp}/orakul_zimage_pylib
  python3 -m pip install -q --no-index --no-deps --upgrade --target "$lib" $W/diffusers-*.whl \
    $W/importlib_metadata-*.whl $W/zipp-*.whl >"$OUT/zimage_pip.log" 2>&1
  export PYTHONPATH=$lib${PYTHONPATH:+:$PYTHONPATH}
  if ! python3 -c "from diffusers import ZImageTransformer2DModel" >>"$OUT/zimage_pip.log" 2>&1; then
    python3 -m pip install -q --no-index --no-deps --upgrade --target "$lib" $W/huggingface_hub-*.whl >>"$OUT/zimage_pip.log" 2>&1
    python3 -c "from diffusers import ZImageTransformer2DModel" >>"$OUT/zimage_pip.log" 2>&1 \
      || { echo "== diffusers does not import (see zimage_pip.log)"; tail -5 "$OUT/zimage_pip.log"; return 1; }
  fi
}
for ph in $phases; do
  t0=$(date +%s)
  case $ph in
  build)
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
        >'$OUT/zimage_build.log' 2>&1 && cmake --build $B -j16 --target orakul orakul_plugin_zimage \
        orakul_plugin_image_codecs orakul_plugin_mse orakul_plugin_adamw bench_zimage_check >>'$OUT/zimage_build.log' 2>&1"
    rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
    [ $rc -eq 0 ] || { grep -E "error" "$OUT/zimage_build.log" | head -20; tail -20 "$OUT/zimage_build.log"; exit 1; } ;;
  check)
    pylib || continue
    # the 12 GB checkpoint in RAM when /dev/shm has room (writing it to disk costs a minute)
    wk=${TMPDIR:-/tmp}/orakul_zimage_check
    [ "$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)" -gt 20000000 ] 2>/dev/null && wk=/dev/shm/orakul_zimage_check
    timeout $(cap 170) python3 bench/zimage/zimage_gpu_check.py --bin $B/bench/zimage/bench_zimage_check \
      --res 512 --txt 256 --work $wk >"$OUT/zimage_check.log" 2>&1
    echo "== check (real shape vs diffusers) rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "^\{" "$OUT/zimage_check.log" | tee -a "$J"
    grep -E "loaded|forward|zimage_gpu_check|Error|error|Traceback" "$OUT/zimage_check.log" | head -12
    rm -rf "$wk" ;;
  step)
    tae=""
    for d in "$root/.carry/taef1" "$root/.carry/shared/assets/taef1" "$root/../taef1" "$root/../shared/assets/taef1"; do
      [ -z "$tae" ] && [ -f "$d/taef1_encoder.safetensors" ] && tae=$d
    done
    [ -n "$tae" ] || { echo "== no TAEF1 weights (.carry/taef1): step skipped"; continue; }
    ds=${TMPDIR:-/tmp}/orakul_zimage_ds; rm -rf "$ds" ${TMPDIR:-/tmp}/orakul_zimage_out; mkdir -p "$ds"
    python3 -c "from PIL import Image; Image.open('assets/photos/astronaut.png').convert('RGB').resize((1024,1024), Image.BICUBIC).save('$ds/astronaut.png')"
    echo "an astronaut" > "$ds/astronaut.txt"
    steps=${STEPS:-8}
    orakul_step() {  # $1: vram_budget_gb (0: the whole card)
      local t1; t1=$(date +%s); rm -rf ${TMPDIR:-/tmp}/orakul_zimage_out
      cat > ${TMPDIR:-/tmp}/zimage_step.yaml <<YAML
job: extension
config:
  name: bench_zimage_r32
  process:
    - type: diffusion_trainer
      training_folder: ${TMPDIR:-/tmp}/orakul_zimage_out
      device: cuda:0
      network: {type: lora, linear: 32, linear_alpha: 32}
      save: {dtype: bf16, save_every: 100000, max_step_saves_to_keep: 1}
      datasets:
        - folder_path: $ds
          resolution: [1024]
      train: {batch_size: 1, steps: $steps, gradient_checkpointing: true, optimizer: adamw, lr: 1e-4, dtype: bf16, disable_sampling: true}
      model:
        name_or_path: preset:zimage-turbo
        arch: zimage:turbo
        vram_budget_gb: $1
        model_kwargs: {codec: taef1, taef1_path: $tae, context_len: 512}
      logging: {log_every: 1}
YAML
      timeout $(cap 120) $B/bin/orakul run ${TMPDIR:-/tmp}/zimage_step.yaml >"$OUT/zimage_step_orakul_b$1.log" 2>&1
      echo "== orakul Z-Image 1024² rank 32 budget $1 GiB rc=$? in $(( $(date +%s) - t1 )) s"
      grep -E "error|peak|LoRA:|offloading|predicted step" "$OUT/zimage_step_orakul_b$1.log" | head -8
      python3 - "$OUT/zimage_step_orakul_b$1.log" "$1" <<'PY' | tee -a "$J"
import json, re, statistics, sys
ts = [float(m.group(2)) for m in (re.search(r"^step (\d+)/\d+ .* ([0-9.]+) s/it", l) for l in open(sys.argv[1], errors="replace")) if m and int(m.group(1)) >= 3]
print(json.dumps(dict(impl="orakul", res=1024, txt=512, rank=32, vram_budget_gb=float(sys.argv[2]), s_per_it=round(statistics.median(ts), 4) if ts else None, s_per_it_all=ts)))
PY
    }
    orakul_step 0
    for mode in eager compile; do
      t1=$(date +%s)
      timeout $(cap 150) python3 bench/zimage/torch_zimage_ref.py --res 1024 --txt 512 --ranks 32 --steps ${TORCH_STEPS:-5} \
        $([ $mode = compile ] && echo --compile) >"$OUT/zimage_step_torch_$mode.log" 2>&1
      echo "== torch_zimage_ref $mode rc=$? in $(( $(date +%s) - t1 )) s"
      grep -E "^\{" "$OUT/zimage_step_torch_$mode.log" | tee -a "$J"
      grep -E "Error|error" "$OUT/zimage_step_torch_$mode.log" | tail -3
    done
    # the 12 GiB budget (the planner streams 18 of 34 blocks) when time is left
    if [ $(( t_end - $(date +%s) )) -gt 60 ]; then orakul_step ${BUDGET2:-12}; else echo "== budget ${BUDGET2:-12} GiB run: no time left"; fi ;;
  esac
done
echo "== total $(( $(date +%s) - (t_end - ${ZIMAGE_GPU_BUDGET_S:-290}) )) s"
