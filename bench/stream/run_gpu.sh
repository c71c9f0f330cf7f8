#!/bin/bash
# bench/stream/run_gpu.sh — the streaming runtime's measurements on the GPU machine
# (issue #8 §6, docs/PERF.md "Streaming"): builds, then runs each case named on
# the command line and prints its step time, bytes and GB/s each way, peak device
# memory (the allocator's, and the device's own used memory) and host memory.
#   ceil                      pinned PCIe and GEMM ceilings (torch_flux_ref.py --ceilings)
#   f1:<budget>[:<qtype>]     FLUX.1-dev size, bf16 (or qtype), rank 128, 1024², AdamW
#   seed:<rank>:<res>:<budget> FLUX.2-dev size, fp8 E5M2, AdamW-8bit, alpha 64 (the seed's run)
#   qloss:<qtype>             200 steps at FLUX width, qtype none|fp8_e4m3|fp8_e5m2 (issue #6 §5)
# Budget 0 = no budget (the resident baseline on the 141 GB card).
# Carry .gpu-deps and .carry (torch_flux_ref.py, taef1/). Env: STEPS (default 4);
# WEIGHT_DTYPE (seed cases: network.weight_dtype, fp32 masters by default, bf16 as the seed);
# STREAM_TRAINABLE (model.stream_trainable_state: always | never; unset: auto);
# STREAM_COMPRESSION (model.stream_compression: always | never; unset: auto);
# TRACE=1 (the lanes' timeline, ORAKUL_STREAM_TRACE, summarised by trace_timeline.py;
# TRACE_BLOCKS=1 adds the per-block table).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; root=$PWD
bash bench/train/run_gpu.sh build | tail -1
B=$root/build-gpu
[ -x $B/bin/orakul ] || { echo "no orakul binary"; exit 1; }
export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$whl" ] && export ORK_CUDNN_LIB=${ORK_CUDNN_LIB:-$whl/libcudnn.so.9}
ds=/tmp/ork-bench/ds; mkdir -p $ds
for r in 512 1024; do mkdir -p $ds$r; python3 -c "from PIL import Image; Image.open('assets/photos/astronaut.png').convert('RGB').resize(($r,$r), Image.BICUBIC).save('$ds$r/astronaut.png')"; echo "an astronaut" > $ds$r/astronaut.txt; done
# the device's own used memory, sampled every 0.5 s while a run lasts
watch_mem() { local f=$1; : > $f; while sleep 0.5; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> $f 2>/dev/null; done; }
for c in "$@"; do
  IFS=: read -r kind a b d <<< "$c"
  out=/tmp/ork-bench/out; rm -rf $out
  case $kind in
  ceil) timeout 120 python3 .carry/torch_flux_ref.py --ceilings --ranks 16 --steps 1 > "$OUT/ceil.log" 2>&1; echo "== ceilings rc=$?"; grep -iE "ceil|GB/s|TFLOP" "$OUT/ceil.log" | head -8; continue ;;
  f1) q=${b:-}; y=/tmp/f1_$a$q.yaml
      sed -e "s#@RANK@#128#g" -e "s#@OUT@#$out#" -e "s#@DS@#${ds}1024#" -e "s#@STEPS@#${STEPS:-4}#" -e "s#@BUDGET@#$a#" \
          -e "s#@TAEF1@#$root/.carry/taef1#" -e "s#dtype: bf16, save_every#dtype: ${SAVE_DTYPE:-bf16}, save_every#" bench/train/flux1_dev_1024.yaml.in > $y
      [ -n "$q" ] && sed -i "s#arch: flux\$#arch: flux\n        quantize: true\n        qtype: $q#" $y
      [ -n "${MAX_GRAD_NORM:-}" ] && sed -i "s#lr: 1e-4, dtype: bf16}#lr: 1e-4, dtype: bf16, max_grad_norm: $MAX_GRAD_NORM}#" $y
      name="flux1-dev r128 1024² budget $a ${q:-bf16}"; log="$OUT/f1_b$a${q:+_$q}.log" ;;
  seed) y=/tmp/seed_${a}_${b}_${d}.yaml
      sed -e "s#@RANK@#$a#g" -e "s#@RES@#$b#g" -e "s#@OUT@#$out#" -e "s#@DS@#$ds$b#" -e "s#@STEPS@#${STEPS:-4}#" -e "s#@BUDGET@#$d#g" \
          -e "s#linear_alpha: 64}#linear_alpha: 64, weight_dtype: ${WEIGHT_DTYPE:-fp32}}#" bench/stream/flux2_dev.yaml.in > $y
      w=${WEIGHT_DTYPE:+ ${WEIGHT_DTYPE} LoRA}; name="flux2-dev fp8e5m2 r$a $b² budget $d$w"; log="$OUT/seed_r${a}_${b}_b$d${WEIGHT_DTYPE:+_$WEIGHT_DTYPE}.log" ;;
  qloss) q=$a; y=/tmp/qloss_$q.yaml; mkdir -p /tmp/ork-bench/photos; cp assets/photos/*.png assets/photos/*.jpg /tmp/ork-bench/photos/ 2>/dev/null
      sed -e "s#@QTYPE@#$q#g" -e "s#@QUANTIZE@#$([ $q = none ] && echo false || echo true)#" -e "s#@OUT@#$out#" \
          -e "s#@DS@#/tmp/ork-bench/photos#" -e "s#@TAEF1@#$root/.carry/taef1#" bench/quant/loss_flux_width.yaml.in > $y
      name="qloss $q (FLUX width, 200 steps)"; log="$OUT/qloss_$q.log" ;;
  *) echo "unknown case $c"; continue ;;
  esac
  # model.stream_trainable_state (auto by default): STREAM_TRAINABLE=always|never
  [ -n "${STREAM_TRAINABLE:-}" ] && { sed -i "s#^\( *\)vram_budget_gb: \(.*\)#\1vram_budget_gb: \2\n\1stream_trainable_state: $STREAM_TRAINABLE#" $y; name="$name, stream_trainable_state $STREAM_TRAINABLE"; }
  [ -n "${STREAM_COMPRESSION:-}" ] && { sed -i "s#^\( *\)vram_budget_gb: \(.*\)#\1vram_budget_gb: \2\n\1stream_compression: $STREAM_COMPRESSION#" $y; name="$name, stream_compression $STREAM_COMPRESSION"; }
  watch_mem /tmp/mem.txt & wp=$!
  tr=; [ -n "${TRACE:-}" ] && tr=${log%.log}.trace
  t0=$(date +%s); ORAKUL_STREAM_TRACE=$tr ORAKUL_STREAM_TIMING=${ORAKUL_STREAM_TIMING:-1} timeout ${TRAIN_TIMEOUT:-300} $B/bin/orakul run $y > "$log" 2>&1; rc=$?
  kill $wp 2>/dev/null; wait $wp 2>/dev/null
  echo "== $name: rc=$rc in $(( $(date +%s) - t0 )) s; device memory used (nvidia-smi max) $(sort -n /tmp/mem.txt | tail -1) MiB"
  [ $kind = qloss ] && { grep -oE "^step [0-9]+/[0-9]+ +loss [0-9.eE+-]+" "$log" | awk '{print $4}' > "$OUT/qloss_$a.txt"; echo "   steps $(wc -l < "$OUT/qloss_$a.txt"), mean loss of the last 50: $(tail -50 "$OUT/qloss_$a.txt" | awk '{s+=$1} END {if (NR) printf "%.5f", s/NR}')"; grep -E "error" "$log" | head -3; continue; }
  grep -E "^step|error|peak|streaming|host memory|LoRA:|quantized|plan|weights on|ready in" "$log" | grep -v "^step [2-9]/" | tail -13
  [ -n "$tr" ] && [ -s "$tr" ] && python3 bench/stream/trace_timeline.py "$tr" ${TRACE_BLOCKS:+--blocks}
done
