#!/bin/bash
# bench/text/seed_two_phase_gpu.sh — the seed's full run in two phases, one
# `orakul run` (issue #29 point 5): encode N captions through FLUX.2-dev's
# Mistral-Small-3.x text encoder within model.vram_budget_gb (quantize_te
# qfloat8: fp8 on the link, streamed block by block, one weight pass for all
# captions; its memory given back), then train FLUX.2-dev r1280 512² at the
# same budget on those embeddings (the seed's run of bench/stream/run_gpu.sh
# seed:1280:512:24: fp8 E5M2 frozen weights, AdamW-8bit, F32 LoRA masters).
# Random weights at the real shapes: the encoder's 30 layers written by
# bench/text/bench_llm.py --make-only (35 GB of bf16 shards on the disk: page
# cache, which the plan's MemAvailable check counts as available, unlike
# /dev/shm), the denoiser the preset's (preset:flux2-dev).
# Phases (one deadline for all, SEED2_BUDGET_S, 575 s from the start; a phase the time left cannot
# finish, with those after it, is not started: the line says which call to make next, exit 3):
#   build   configure + build with CUDA in build-gpu/: orakul and the plugins a run loads (kept
#           while the machine stays warm: after bench/text/llm_bench_gpu.sh build, seconds)
#   make    the encoder's shards ($SEED2_DIR, default $TMPDIR/orakul_seed2; kept for `run`)
#   plan    `orakul plan` of the job (the encode's plan, then the denoiser's)
#   run     `orakul run`: phase 1 (encode) and phase 2 (the steps) times; the shards are deleted as
#           soon as the log says the captions are encoded (the 64 GiB disk then holds the 15.6 GB
#           LoRA instead), the job's output after the report (KEEP=1 keeps both)
# Usage (repo root; carry .gpu-deps): bash bench/text/seed_two_phase_gpu.sh [build] [make] [plan] [run]
#        (no phase: all four). Expected on the H200: build 3-4 min cold (seconds when build-gpu/ is
#        warm), make ~1.5 min, plan ~20 s, run ~3.5 min (encode ~30 s, FLUX.2-dev's r1280 set-up ~2 min,
#        4 steps, the LoRA's save ~30 s): with a cold build, two calls — `... build`, then
#        `... make plan run` on the same (warm) machine.
# Env: N (captions, 64), STEPS (4), BUDGET (24), RANK (1280), RES (512), KEEP=1 keeps the shards.
# Logs in $OUT: seed2_build.log, seed2_make.log, seed2_plan.log, seed2_run.log.
# CPU dry run of everything but the run: ORAKUL_CUDA=OFF bash ... plan with SEED2_HEADERS=1
# (the shards' headers only, sparse files, and build/ instead of build-gpu/).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
export PYTHONUNBUFFERED=1
phases="$*"; [ -n "$phases" ] || phases="build make plan run"
N=${N:-64}; STEPS=${STEPS:-4}; BUDGET=${BUDGET:-24}; RANK=${RANK:-1280}; RES=${RES:-512}
D=${SEED2_DIR:-${TMPDIR:-/tmp}/orakul_seed2}
B=$root/build-gpu
[ "${ORAKUL_CUDA:-ON}" = OFF ] && B=${SEED2_BUILD:-$root/build}
t_end=$(( $(date +%s) + ${SEED2_BUDGET_S:-575} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
if [ -d "$root/.gpu-deps/usr" ]; then
  export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$whl" ] && export ORK_CUDNN_LIB=${ORK_CUDNN_LIB:-$whl/libcudnn.so.9}

# the job: the seed's config (bench/stream/flux2_dev.yaml.in) with the text encoder's paths, quantize_te,
# and N images (one photo, N captions from tests/fixtures/text/captions.txt)
ds=/tmp/ork-seed2/ds$RES; y=/tmp/ork-seed2/seed2.yaml; out=/tmp/ork-seed2/out
make_job() {
  rm -rf "$ds" "$out"; mkdir -p "$ds"
  python3 - "$ds" "$RES" "$N" <<'EOF'
import shutil
import sys
ds, res, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = "assets/photos/astronaut.png"  # 512 x 512
try:
    from PIL import Image
    im = Image.open(src).convert("RGB").resize((res, res), Image.BICUBIC)
except ImportError:  # no PIL here: the photo as it is (the dataset's buckets resize it)
    im = None
caps = [l.strip() for l in open("tests/fixtures/text/captions.txt", encoding="utf-8", errors="replace") if l.strip()]
for i in range(n):
    if im is not None:
        im.save("%s/img%04d.png" % (ds, i))
    else:
        shutil.copy(src, "%s/img%04d.png" % (ds, i))
    open("%s/img%04d.txt" % (ds, i), "w", encoding="utf-8").write(caps[i % len(caps)] + (" #%d" % i if i >= len(caps) else ""))
EOF
  sed -e "s#@RANK@#$RANK#g" -e "s#@RES@#$RES#g" -e "s#@OUT@#$out#" -e "s#@DS@#$ds#" -e "s#@STEPS@#$STEPS#" \
      -e "s#@BUDGET@#$BUDGET#g" -e "s#linear_alpha: 64}#linear_alpha: 64, weight_dtype: ${WEIGHT_DTYPE:-fp32}}#" \
      -e "s#^\( *\)qtype: bf8#\1qtype: bf8\n\1quantize_te: true\n\1qtype_te: qfloat8#" \
      -e "s#in_channels: 768}#in_channels: 768, text_encoder_path: $D/mistral, text_encoder_tokenizer_path: $root/tests/fixtures/text/tok_flux2/mistral}#" \
      bench/stream/flux2_dev.yaml.in > $y
}
mkdir -p /tmp/ork-seed2
# what each phase takes at most on the H200 (s), so that a call stops before a phase it cannot finish
need_of() { case $1 in build) echo 240;; make) echo 110;; plan) echo 30;; run) echo 260;; *) echo 0;; esac; }
rest="$phases"
for ph in $phases; do
  t0=$(date +%s)
  need=0; for r in $rest; do need=$(( need + $(need_of $r) )); done
  if [ "$ph" != build ] && [ $(( t_end - t0 )) -lt $need ]; then
    echo "== stopping before '$ph': $(( t_end - t0 )) s left, '$rest' needs ~$need s: call again with" \
         "\`bash bench/text/seed_two_phase_gpu.sh $rest\` (build-gpu/ stays while the machine is warm)"
    exit 3
  fi
  rest=${rest#*$ph}
  case $ph in
  build)
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    [ -d "$root/.gpu-deps/usr" ] && export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr \
        PKG_CONFIG_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu/pkgconfig
    timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
        && cmake --build $B -j16 --target orakul orakul_plugin_flux orakul_plugin_llm orakul_plugin_quant \
           orakul_plugin_mse orakul_plugin_adamw orakul_plugin_image_codecs orakul_plugin_t5clip" > "$OUT/seed2_build.log" 2>&1
    rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/seed2_build.log"
    [ $rc -eq 0 ] || exit 1 ;;
  make)
    rm -rf "$D" /tmp/ork-seed2/out; mkdir -p "$D"
    df -h "$D" | tail -1; free -g | head -2
    # 35 GB of shards (deleted by `run` once the encode is done, before the 15.6 GB LoRA is saved)
    if [ -z "${SEED2_HEADERS:-}" ]; then
      avail=$(df -k --output=avail "$D" | tail -1)
      if [ "${avail:-0}" -lt 38000000 ] 2>/dev/null; then
        echo "== make: $D has $(( ${avail:-0} / 1048576 )) GiB free; the shards need 35 GB (SEED2_DIR elsewhere)"; exit 1
      fi
    fi
    if [ -n "${SEED2_HEADERS:-}" ]; then mode=--headers-only; else mode=--make-only; fi
    timeout $(left) python3 bench/text/bench_llm.py $mode --which mistral --dir "$D" > "$OUT/seed2_make.log" 2>&1
    rc=$?; echo "== make ($mode) rc=$rc in $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/seed2_make.log"
    [ $rc -eq 0 ] || exit 1 ;;
  plan)
    make_job
    ORAKUL_PLAN_DEVICE=${ORAKUL_PLAN_DEVICE:-h200} timeout $(left) $B/bin/orakul plan $y > "$OUT/seed2_plan.log" 2>&1
    echo "== plan rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "^text|^  |predicted|error|host" "$OUT/seed2_plan.log" | head -24 ;;
  run)
    make_job
    [ -d "$D/mistral" ] || { echo "== run: no shards in $D/mistral (run the make phase first, on the same machine)"; exit 1; }
    : > "$OUT/seed2_run.log"
    # the shards are read by the encode only: deleted once it is done (the disk then holds the LoRA)
    if [ -z "${KEEP:-}" ]; then
      ( while kill -0 $$ 2>/dev/null && ! grep -qE "text: [0-9]+ captions: [0-9]+ encoded" "$OUT/seed2_run.log"; do
          sleep 2; done; rm -rf "$D" ) &
      watcher=$!
    fi
    timeout $(left) $B/bin/orakul run $y > "$OUT/seed2_run.log" 2>&1
    rc=$?; t_all=$(( $(date +%s) - t0 ))
    [ -n "${watcher:-}" ] && kill $watcher 2>/dev/null
    echo "== run rc=$rc in $t_all s (N $N captions, r$RANK $RES², budget $BUDGET GiB, $STEPS steps)"
    grep -E "text encode|text: |streaming|plan|ready in|^step|error|peak" "$OUT/seed2_run.log" | grep -v "^step [3-9]/" | head -24
    # phase 1: the encode's own line; phase 2: the steps after the first (the first warms up)
    enc=$(grep -oE "text: [0-9]+ captions: [0-9]+ encoded \([0-9.]+ s\)" "$OUT/seed2_run.log" | tail -1)
    step=$(grep -oE "^step [0-9]+/[0-9]+.*" "$OUT/seed2_run.log" | tail -n +2 | grep -oE "[0-9.]+ s/it" | head -5 | tr '\n' ' ')
    echo "== phase 1 (encode): ${enc:-not found}; phase 2 (train): ${step:-see seed2_run.log}"
    [ $rc -eq 0 ] || tail -5 "$OUT/seed2_run.log"
    [ -n "${KEEP:-}" ] || rm -rf "$D" "$out" ;;
  *) echo "unknown phase $ph (build make plan run)"; exit 2 ;;
  esac
done
