#!/bin/bash
# bench/run_open_gpu.sh — the GPU runs behind docs/PERF.md's streaming rows (issue #8), to
# re-measure them after a change. The thirteenth session (2026-11-30) measured every §6 row
# at 0.90 or above: the seed's F32 r1280 512² run 1.823 s (0.924 of the link's transfer-only
# time) with `TRACE=1 SEED_CASES=seed:1280:512:24 bash bench/run_open_gpu.sh seed`; the 1024²
# pairs with `[WEIGHT_DTYPE=bf16] LEND_CASES="seed:1280:1024:0,seed:1280:1024:24" bash
# bench/run_open_gpu.sh lend` (0.931 / 0.959); FLUX.1-dev at 16 GiB with
# `LEND_CASES="f1:0,f1:16"` (0.909); `determ` with the trainable state streamed (f1:12, bitwise);
# `tests` (TESTS_TIMEOUT=300: the suite takes ~120-200 s).
# State at the fifteenth session's end (2026-12-02, b84d3ee): `tests` green (21 passed, 3
# skipped). Run GPU checks from a committed tree: `git archive HEAD | tar -x -C .carry/head`,
# carry .gpu-deps + .carry/head (+ .carry/shared for the TAEF1 weights), and run the script
# inside .carry/head with .gpu-deps linked in, so no helper's uncommitted edit travels.
# .gpu-deps also needs the tokenizer's libraries, which ../shared/tools/gpu-deps does not
# fetch: `apt-get download libonig5 libonig-dev libutf8proc2 libutf8proc-dev` and unpack
# them into .gpu-deps as that script does (relative .so links, pkg-config prefix).
# The phases:
#   seed    the seed's runs at e2cdcb9 or later (the forward pass loads LoRA params only):
#           r1280 512² and 1024² at 24 GiB, for their measured byte lines (issue #8 §6b;
#           the resident baselines are in PERF.md: 0.950 s and 2.561 s)
#   determ  bitwise streamed (12 GiB: frozen blocks and the trainable state) == resident
#           at FLUX.1-dev size with our own attention
#           kernels (ORK_CUDNN_SDPA=0: cuDNN's backward accumulates dQ with atomics),
#           LoRA saved in fp32, every saved file compared tensor by tensor
#           (cmp_safetensors.py; DETERM_CASES, default f1:0 f1:0 f1:12), no clipping (a streamed trainable
#           state clips with the previous step's norm) (issue #8 §5)
#   handover ORAKUL_TRAINABLE_CHUNKS=32 vs 1, alternated (HANDOVER, HANDOVER_CASE): the
#           overlapped slot hand-over against the default, one case ~200 s (4 runs: 2 calls)
#   select  ORAKUL_STREAM_SELECT=even vs dense (SELECT, SELECT_CASE; default the r1280 1024²
#           seed): the plan's densest-blocks-first selection against the even spread
#   trainable model.stream_trainable_state auto vs always (TRAINABLE_CASES: f1:16 and the
#           r128 seed run by default), the plan's suggestion measured
#   codec   model.stream_compression never vs auto (CODEC_CASES)
#   tests   ctest -L gpu (with ORK_SHARED_DIR=.carry/shared for the TAEF1 weights)
#   quant   bench_quant speed in a CUDA build (done: docs/quant.md)
#   lend    the lent gradients' efficiency rows, each streamed run beside its resident one (LEND_CASES)
#   perc    the perceptual bench's whole-loss row (issue #9 §5)
# Usage: bash bench/run_open_gpu.sh [phase ...]   (default: seed determ);
# carry [".gpu-deps", ".carry"] (.carry: torch_flux_ref.py, taef1/, shared/assets/taef1).
# A FLUX.2-dev r1280 run needs ~120 s before step 1 and ~30 s to save its 15.6 GB LoRA:
# keep TRAIN_TIMEOUT >= 240. One call has 600 s: split the phases over calls.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; root=$PWD
phases=("$@"); [ ${#phases[@]} -eq 0 ] && phases=(seed determ)
bash bench/train/run_gpu.sh build | tail -1
B=$root/build-gpu
export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
for ph in "${phases[@]}"; do
  t0=$(date +%s)
  case $ph in
  tests)  export ORK_SHARED_DIR=${ORK_SHARED_DIR:-$root/.carry/shared}
          (cd $B && timeout ${TESTS_TIMEOUT:-200} ctest -L gpu -j1 --output-on-failure > "$OUT/ctest_gpu.log" 2>&1)
          echo "== tests rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "Test +#|tests passed" "$OUT/ctest_gpu.log"
          grep -E "PSNR|decoder grad|gradient: L2" "$OUT/ctest_gpu.log" | head -12 ;;
  quant)  timeout 120 $B/bench/quant/bench_quant speed > "$OUT/quant_speed.txt" 2>&1
          echo "== quant speed rc=$? in $(( $(date +%s) - t0 )) s"; grep -v "plugin quant" "$OUT/quant_speed.txt" ;;
  seed)   STEPS=${STEPS:-4} TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-240} bash bench/stream/run_gpu.sh \
            ${SEED_CASES:-seed:1280:512:24 seed:1280:1024:24} \
            | grep -v "build rc" ;;
  determ) i=0; for c in ${DETERM_CASES:-f1:0 f1:0 f1:12}; do i=$((i+1))
            ORK_CUDNN_SDPA=0 SAVE_DTYPE=fp32 MAX_GRAD_NORM=0 STEPS=4 bash bench/stream/run_gpu.sh $c | grep -E "^==|^step [2-4]/"
            rm -rf /tmp/determ_$i; mv /tmp/ork-bench/out /tmp/determ_$i
            m=$(find /tmp/determ_$i -name metrics.jsonl | head -1); grep -oE '"loss": *[^,]+' "$m" > /tmp/determ_$i.loss; done
          for j in $(seq 2 $i); do
            echo "== determinism: run $j vs run 1 (ORK_CUDNN_SDPA=0): losses $(cmp -s /tmp/determ_1.loss /tmp/determ_$j.loss && echo identical || echo DIFFER); saved files:"
            python3 bench/stream/cmp_safetensors.py /tmp/determ_1 /tmp/determ_$j; done
          paste /tmp/determ_*.loss ;;
  handover) # the slot hand-over A/B (docs/PERF.md, fourth session): chunked write-back vs whole record, alternated
          for c in ${HANDOVER:-32 1 32 1}; do echo "== ORAKUL_TRAINABLE_CHUNKS=$c"
            ORAKUL_TRAINABLE_CHUNKS=$c STEPS=${STEPS:-4} TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-240} bash bench/stream/run_gpu.sh ${HANDOVER_CASE:-seed:1280:512:24} \
              | grep -E "^==|streaming measured"; done ;;
  select) # the streamed-set A/B (docs/PERF.md, fifth session): even spread vs densest blocks first
          for sel in ${SELECT:-even dense}; do echo "== ORAKUL_STREAM_SELECT=$sel"
            ORAKUL_STREAM_SELECT=$sel STEPS=${STEPS:-4} TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-240} bash bench/stream/run_gpu.sh ${SELECT_CASE:-seed:1280:1024:24} \
              | grep -E "^==|streaming"; done ;;
  trainable) # model.stream_trainable_state auto vs always (sixth session's planner; TRAINABLE_CASES,
          # default FLUX.1-dev 16 GiB and the r128 seed run, where the plan predicts -14% / -10%)
          for c in ${TRAINABLE_CASES:-f1:16 seed:128:512:24}; do for st in auto always; do
            STREAM_TRAINABLE=$([ $st = auto ] || echo $st) STEPS=${STEPS:-4} TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-240} \
              bash bench/stream/run_gpu.sh $c | grep -E "^==|streaming|faster"; done; done ;;
  codec)  # model.stream_compression never vs auto (seventh session: BF16 blocks coded in transit);
          # CODEC_CASES "case:mode ..." (default FLUX.1-dev at 16 and 12 GiB both ways, 24 GiB coded)
          for cm in ${CODEC_CASES:-f1:16:never f1:16:auto f1:12:never f1:12:auto f1:24:auto}; do
            c=${cm%:*}; m=${cm##*:}
            STREAM_COMPRESSION=$m STEPS=${STEPS:-4} TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-240} \
              bash bench/stream/run_gpu.sh $c | grep -E "^==|streaming|faster|peak"; done ;;
  lend)   # the lent gradients (tenth session), the efficiency rows: each LEND_CASES "<resident>,<streamed>[,<select>]"
          # run as resident then streamed in this call (STEPS=6, the lane trace summarised); prints
          # resident / streamed (steps 2-6 median / the streaming line) = the issue's efficiency
          for rs in ${LEND_CASES:-seed:128:512:0,seed:128:512:24 seed:128:512:0,seed:128:512:24,even f1:0,f1:16}; do
            IFS=, read -r rc sc sel <<< "$rs"
            STEPS=6 bash bench/stream/run_gpu.sh $rc 2>&1 | grep -E "^== "
            r=$(grep -hE "^step [2-6]/6 " "$(ls -t $OUT/*.log | head -1)" | grep -oE "[0-9.]+ s/it" | sort -n | sed -n 3p | cut -d' ' -f1)
            o=$(ORAKUL_STREAM_SELECT=${sel:-} STEPS=6 TRACE=1 bash bench/stream/run_gpu.sh $sc 2>&1 | grep -v "attention:")
            echo "$o" | grep -E "^==|streaming (measured|loads|waits)|window|forward|backward|tail|start"
            st=$(echo "$o" | grep -oE "measured over [0-9]+ steps: [0-9.]+" | grep -oE "[0-9.]+$")
            echo "== $sc${sel:+ ($sel)} against $rc: resident $r s, streamed $st s, efficiency $(python3 -c "print(round($r/$st, 3))" 2>/dev/null)"
          done ;;
  perc)   OUT=$OUT/perc STEPS=5 LIMIT=200 bash bench/perceptual/run_gpu.sh bench 2>&1 | tail -12 ;;
  *)      echo "unknown phase $ph" ;;
  esac
done
