#!/bin/bash
# bench/dist/run_gpu.sh — multi-GPU data-parallel training (core/dist, issue #11) on the
# 2-GPU machine (run tool, kind nvidia-h200-x2). Phases, in the order given:
#   env    what the machine has: GPUs (nvidia-smi), libnccl.so.2 (exported as ORAKUL_NCCL_LIB);
#          always runs first, whatever the phases
#   build  cmake + build of orakul, the plugins and the dist tests into build-gpu
#          (the same flags as bench/train/run_gpu.sh, so an existing build-gpu is reused)
#   tests  ctest -R '^dist_': the CPU dist tests and the GPU ones (NCCL with one GPU,
#          a 2-process all-reduce + bucket sync, 2 GPUs x batch 1 == 1 GPU x batch 2,
#          resume on another number of GPUs)
#   scale  FLUX.1-dev size (preset, random weights), 1024², LoRA rank $RANK, batch 1 per GPU:
#          1 GPU vs `orakul run --gpus 2`; scaling efficiency = (2 / t2) / (2 · 1 / t1) = t1 / t2
#          from the median s/it of steps 3..$STEPS
# Usage (each call of the run tool is at most 10 minutes, so two calls):
#   bash bench/dist/run_gpu.sh build tests      # ~5 min with an empty build-gpu
#   bash bench/dist/run_gpu.sh scale            # ~4-6 min
#   (no argument: build tests scale, for a machine without the 10-minute limit)
# Carry: .gpu-deps (Debian libraries the build links, as for bench/train) and, for
# `scale`, .carry/taef1 (the FLUX.1 latent codec; without it `scale` stops with a line).
# Knobs: RANK (128), STEPS (8), TRAIN_TIMEOUT (s per training run, 270), BUILD_JOBS (32), BUILD_DIR,
#        NCCL_DEBUG (WARN; INFO shows the transport NCCL picked), ORAKUL_DIST_BUCKET_MB (50).
# Everything lands in $OUT (default /tmp/out): one log per step and summary.txt; every step
# has a timeout and prints one "== <step> rc=<code> in <s> s" line, and the script goes on to
# the next phase when one fails (its exit status is the number of failed steps).
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
B=${BUILD_DIR:-$root/build-gpu}
RANK=${RANK:-128}; STEPS=${STEPS:-8}; TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-270}; JOBS=${BUILD_JOBS:-32}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
export PYTHONUNBUFFERED=1
failed=0
phases=("$@"); [ ${#phases[@]} -eq 0 ] && phases=(build tests scale)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
# step NAME TIMEOUT CMD...: run with a timeout, log to $OUT/NAME.log, one summary line
step() {
  local name=$1 t=$2; shift 2
  local t0=$(date +%s)
  timeout --kill-after=20 "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && say "== $name rc=124 (timed out after $t s) in $(( $(date +%s) - t0 )) s" \
                  || say "== $name rc=$rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  return $rc
}

find_nccl() { # a libnccl.so.2 the loader finds, or a path to export
  if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then echo default; return; fi
  local d
  for d in /usr/local/cuda*/lib /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
           /usr/lib64 /opt/nvidia/*/lib; do
    [ -e "$d/libnccl.so.2" ] && { echo "$d/libnccl.so.2"; return; }
  done
  timeout 30 find / -xdev -name 'libnccl.so.2' -not -path '*/proc/*' 2>/dev/null | head -1
}

phase_env() {
  say "== env: $(date -u +%FT%TZ) on $(hostname)"
  timeout 20 nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>&1 | tee -a "$OUT/summary.txt"
  timeout 20 nvidia-smi topo -m >"$OUT/topo.txt" 2>&1 && say "   (GPU topology in topo.txt)"
  ngpu=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  say "   GPUs visible: $ngpu"
  local nccl; nccl=$(find_nccl)
  if [ -z "$nccl" ]; then
    say "   NCCL: no libnccl.so.2 on this machine: the dist GPU tests skip (77) and scale cannot run"
  elif [ "$nccl" = default ]; then
    say "   NCCL: libnccl.so.2 on the loader path ($(ldconfig -p | grep 'libnccl\.so\.2 ' | head -1 | sed 's/.*=> //'))"
  else
    export ORAKUL_NCCL_LIB=$nccl
    say "   NCCL: $nccl (exported as ORAKUL_NCCL_LIB)"
  fi
}

phase_build() {
  [ -d "$ORK_DEPS" ] || say "   (no .gpu-deps/usr: the build needs libyaml, jansson, libpng, libjpeg, libwebp, CUnit installed)"
  step build_configure 240 cmake -S . -B "$B" -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release ||
    { tail -20 "$OUT/build_configure.log"; return 1; }
  step build 420 cmake --build "$B" -j"$JOBS" --target orakul orakul_plugin_flux orakul_plugin_mse orakul_plugin_adamw \
       test_dist_env test_dist_rendezvous test_dist_shard test_dist_bucket test_dist_launcher test_dist_nccl \
       test_dist_cli test_dist_gpu test_dist_train_gpu ||
    { grep -E "error" "$OUT/build.log" | head -20; tail -5 "$OUT/build.log"; return 1; }
}

phase_tests() {
  [ -x "$B/bin/orakul" ] || { say "== tests: no $B/bin/orakul (run the build phase first)"; failed=$((failed + 1)); return 1; }
  local t0=$(date +%s) rc
  (cd "$B" && timeout --kill-after=20 420 ctest -R '^dist_' --output-on-failure -j1 --timeout 400) \
    >"$OUT/ctest_dist.log" 2>&1
  rc=$?
  say "== ctest -R ^dist_ rc=$rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  grep -E "Test +#|tests passed|\*\*\*|differs|^  step [0-9]+: |skipped" "$OUT/ctest_dist.log" | head -40 | tee -a "$OUT/summary.txt"
  if [ "${ngpu:-0}" -ge 1 ] && grep -qE "dist_(train_)?gpu .*Skipped" "$OUT/ctest_dist.log"; then
    say "!! a GPU dist test skipped on a machine with $ngpu GPU(s): see its reason in ctest_dist.log (NCCL missing? one GPU?)"
    [ "${ngpu:-0}" -ge 2 ] && failed=$((failed + 1))
  fi
}

# median of the "X s/it" figures of steps >= 3 in a log
median_s_it() {
  grep -E '^step [0-9]+/' "$1" | awk '{ split($2, s, "/"); if (s[1] + 0 < 3) next;
      for (i = 2; i <= NF; i++) if ($i == "s/it") print $(i - 1) }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan"; exit } if (NR % 2) print v[(NR + 1) / 2];
                              else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

phase_scale() {
  [ -x "$B/bin/orakul" ] || { say "== scale: no $B/bin/orakul (run the build phase first)"; failed=$((failed + 1)); return 1; }
  [ -d "$root/.carry/taef1" ] || { say "== scale: no .carry/taef1 (carry the FLUX.1 TAE folder as for bench/train)"; failed=$((failed + 1)); return 1; }
  local ds=/tmp/ork-dist/ds work=/tmp/ork-dist
  rm -rf "$work"; mkdir -p "$ds"
  # two different 1024² images (every global batch of 2 is full): the photo and its mirror
  if ! timeout 60 python3 -c "
from PIL import Image, ImageOps
im = Image.open('assets/photos/astronaut.png').convert('RGB').resize((1024, 1024), Image.BICUBIC)
im.save('$ds/astronaut.png'); ImageOps.mirror(im).save('$ds/astronaut_mirror.png')" >"$OUT/scale_data.log" 2>&1; then
    say "== scale: could not make the 1024² images (python3 + PIL): $(tail -1 "$OUT/scale_data.log")"; failed=$((failed + 1)); return 1
  fi
  echo "an astronaut" > "$ds/astronaut.txt"; echo "an astronaut" > "$ds/astronaut_mirror.txt"
  local g
  for g in 1 2; do
    sed -e "s#@RANK@#$RANK#g" -e "s#@OUT@#$work/out$g#" -e "s#@DS@#$ds#" -e "s#@STEPS@#$STEPS#" -e "s#@BUDGET@#0#" \
        -e "s#@TAEF1@#$root/.carry/taef1#" bench/train/flux1_dev_1024.yaml.in > "$work/g$g.yaml"
  done
  step scale_1gpu "$TRAIN_TIMEOUT" "$B/bin/orakul" run "$work/g1.yaml"
  grep -E "^step|error|peak" "$OUT/scale_1gpu.log" | tail -4
  step scale_2gpu "$TRAIN_TIMEOUT" "$B/bin/orakul" run --gpus 2 "$work/g2.yaml"
  grep -E "^step|error|distributed|NCCL|peak" "$OUT/scale_2gpu.log" | tail -8
  local t1 t2; t1=$(median_s_it "$OUT/scale_1gpu.log"); t2=$(median_s_it "$OUT/scale_2gpu.log")
  {
    echo "FLUX.1-dev 1024², LoRA rank $RANK, batch 1 per GPU, median s/it of steps 3..$STEPS"
    echo "1 GPU : $t1 s/it"
    echo "2 GPUs: $t2 s/it (global batch 2)"
    awk -v a="$t1" -v b="$t2" 'BEGIN { if (a == "nan" || b == "nan" || b <= 0) { print "efficiency: n/a (a run failed)"; exit }
      printf "samples/s: %.3f (1 GPU) vs %.3f (2 GPUs)\nscaling efficiency (2 GPUs): %.1f%%\n", 1 / a, 2 / b, 100 * a / b }'
  } | tee "$OUT/scaling.txt" | tee -a "$OUT/summary.txt"
}

phase_env # always: the NCCL library the other phases use
for p in "${phases[@]}"; do
  case $p in
    env) ;;
    build) phase_build ;;
    tests) phase_tests ;;
    scale) phase_scale ;;
    *) say "unknown phase '$p' (env, build, tests, scale)"; failed=$((failed + 1)) ;;
  esac
done
say "== done: $failed failed step(s); logs in $OUT"
exit $failed
