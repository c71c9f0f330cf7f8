#!/bin/bash
# bench/perceptual/run_gpu.sh — issue #9 (VGG19 perceptual loss) in ONE call on the GPU
# machine, cheapest and most decisive first:
#   1. build from a private copy (sm_90; only orakul, the plugins it needs,
#      test_perceptual_cuda and bench_vgg19);
#   2. test_perceptual_cuda: the torchvision fixture on CUDA (F32 and BF16 inputs);
#   3. bench_vgg19 (VGG19 features fwd+bwd and the whole loss at 512², ours) and
#      bench_torch.py (torchvision, same weights and inputs, bf16) — ratio table;
#   4. FLUX.1-dev size (random weights), 512², LoRA rank 128, STEPS steps, twice:
#      loss_type mse and loss_type perceptual (decode through TAEF1) — s/it and
#      peak device memory of each, and the difference.
# Carry: .gpu-deps (the Debian deps, ../shared/tools/gpu-deps) and .carry (taef1/).
#   run: command "bash bench/perceptual/run_gpu.sh", carry [".gpu-deps", ".carry"]
# Usage: bash bench/perceptual/run_gpu.sh [all|test|bench|train]  (the build always runs;
# it is incremental when /tmp/ork-perc-build survives from an earlier call on the same machine)
# Every step runs under `timeout`; the call keeps under LIMIT seconds (default 570: a
# command may run 600) by skipping a step that would not fit, and it says so and how
# to run that step alone. Knobs: STEPS (8), RANK (128), RES (512), LIMIT (570).
# $OUT gets exactly these 8 files (the device tool returns at most 8): summary.txt,
# build.log, test.log, bench.jsonl, bench_ours.err, bench_torch.txt, train_mse.log,
# train_perceptual.log. The summary is also printed at the end.
set -u
what=${1:-all}
case $what in all|test|bench|train) ;; *) echo "usage: bash bench/perceptual/run_gpu.sh [all|test|bench|train]"; exit 2;; esac
T0=$(date +%s); LIMIT=${LIMIT:-570}
STEPS=${STEPS:-8}; RANK=${RANK:-128}; RES=${RES:-512}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
SUM=$OUT/summary.txt; : > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }
el() { echo $(( $(date +%s) - T0 )); }
# budget CAP MIN: prints the timeout for the next step, min(CAP, seconds left - 10);
# fails (prints nothing) when fewer than MIN seconds would be left for it.
budget() { local l=$(( LIMIT - $(el) - 10 )); [ "$l" -lt "$2" ] && return 1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
skip() { say "== SKIPPED $1: only $(( LIMIT - $(el) )) s left of $LIMIT; run it alone: bash bench/perceptual/run_gpu.sh $2"; }
want() { [ "$what" = all ] || [ "$what" = "$1" ]; }

say "== bench/perceptual/run_gpu.sh $what  ($(date -u +%FT%TZ); STEPS=$STEPS RANK=$RANK RES=$RES LIMIT=$LIMIT)"
[ -d "$root/.gpu-deps/usr" ] || { say "== FATAL: .gpu-deps missing: call with carry [\".gpu-deps\", \".carry\"]"; exit 1; }
export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
export PYTHONUNBUFFERED=1
say "$(timeout 20 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader 2>&1 | head -2)"

# ---- 1. build ------------------------------------------------------------------------
# A private copy holding only what these targets need, so that another area's
# half-written CMakeLists cannot stop the run (tests/ and bench/ pruned to ours;
# plugins: flux, mse, perceptual, adamw (+ the adamw8bit sources it compiles in)).
src=/tmp/ork-perc-src; B=/tmp/ork-perc-build
t0=$(date +%s)
rm -rf $src; mkdir -p $src
tar --exclude='./build*' --exclude=./.git --exclude=./.carry --exclude=./.gpu-deps --exclude=./.whl \
    --exclude=./output --exclude=./out -cf - . | tar -xf - -C $src
for d in $src/tests/*; do case $d in */common|*/perceptual|*/fixtures|*/CMakeLists.txt) ;; *) rm -rf "$d";; esac; done
for d in $src/bench/*; do case $d in */perceptual|*/CMakeLists.txt) ;; *) rm -rf "$d";; esac; done
for d in $src/plugins/*/*; do case $d in */losses/mse|*/losses/perceptual|*/models/flux|*/optimizers/adamw|*/optimizers/adamw8bit) ;; *) rm -rf "$d";; esac; done
TARGETS="orakul orakul_plugin_flux orakul_plugin_mse orakul_plugin_perceptual orakul_plugin_adamw test_perceptual_cuda bench_vgg19"
if b=$(budget 330 60); then
  timeout $b cmake -S $src -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
    >"$OUT/build.log" 2>&1
  rc=$?
  b2=$(( b - ($(date +%s) - t0) )); [ $b2 -lt 10 ] && b2=10
  [ $rc -eq 0 ] && { timeout $b2 cmake --build $B -j16 --target $TARGETS >>"$OUT/build.log" 2>&1; rc=$?; }
else rc=124; fi
say "== build rc=$rc in $(( $(date +%s) - t0 )) s (targets: $TARGETS; log build.log)"
if [ $rc -ne 0 ]; then
  grep -E "error|Error|No rule" "$OUT/build.log" | head -20 | tee -a "$SUM"; tail -15 "$OUT/build.log"
  say "== FATAL: build failed (rc $rc; 124 = timed out): nothing else can run"; exit 1
fi

# ---- 2. the gpu test ------------------------------------------------------------------------
if want test; then
  if b=$(budget 150 30); then
    mkdir -p $B/tests/perceptual/cuda; t0=$(date +%s)
    (cd $B/tests/perceptual/cuda && timeout $b ../test_perceptual_cuda) >"$OUT/test.log" 2>&1
    rc=$?
    say "== test_perceptual_cuda rc=$rc in $(( $(date +%s) - t0 )) s (0 pass, 1 fail, 77 no GPU, 124 timed out; log test.log)"
    grep -E "Test:|passed|FAILED|relative error|gradient:|tolerance|CU_FAIL|wanted|torchvision [0-9]|Summary|tests |asserts|error" \
      "$OUT/test.log" | grep -v "^orakul: perceptual" | head -60 | tee -a "$SUM"
  else skip "test_perceptual_cuda" test; fi
fi

# ---- 3. the VGG19 bench pair ---------------------------------------------------------------
BD=/tmp/ork-perc-bench
if want bench; then
  rm -rf $BD; mkdir -p $BD
  if b=$(budget 90 30); then
    t0=$(date +%s)
    timeout $b $B/bench/perceptual/bench_vgg19 --size $RES --dir $BD >"$OUT/bench.jsonl" 2>"$OUT/bench_ours.err"
    rc=$?
    say "== bench_vgg19 (ours) rc=$rc in $(( $(date +%s) - t0 )) s (log bench.jsonl, bench_ours.err)"
    cat "$OUT/bench.jsonl" | tee -a "$SUM"; grep -v "^orakul: perceptual" "$OUT/bench_ours.err" | head -10 | tee -a "$SUM"
    if b=$(budget 150 40); then
      t0=$(date +%s)
      timeout $b python3 $root/bench/perceptual/bench_torch.py "$OUT/bench.jsonl" $BD >"$OUT/bench_torch.txt" 2>&1
      rc=$?
      say "== bench_torch.py rc=$rc in $(( $(date +%s) - t0 )) s (log bench_torch.txt)"
      grep -E "^torch [0-9]|^bench_torch|^check|Error|error" "$OUT/bench_torch.txt" | head -12 | tee -a "$SUM"
      sed -n '/^variant/,$p' "$OUT/bench_torch.txt" | tee -a "$SUM"
      [ $rc -eq 0 ] || tail -8 "$OUT/bench_torch.txt" | tee -a "$SUM"
    else skip "bench_torch.py" bench; fi
  else skip "bench_vgg19 + bench_torch.py" bench; fi
fi

# ---- 4. FLUX.1-dev training step, mse vs perceptual -----------------------------------------
if want train; then
  W=/tmp/ork-perc; rm -rf $W; mkdir -p $W/ds
  TAEF1=$root/.carry/taef1
  [ -f $TAEF1/taef1_decoder.safetensors ] || say "== WARNING: $TAEF1/taef1_decoder.safetensors missing (carry .carry): the runs will refuse"
  timeout 60 python3 -c "from PIL import Image; Image.open('$root/assets/photos/astronaut.png').convert('RGB').resize(($RES,$RES), Image.BICUBIC).save('$W/ds/astronaut.png')" \
    2>&1 | tail -2 | tee -a "$SUM"
  [ -s $W/ds/astronaut.png ] || cp $root/assets/photos/astronaut.png $W/ds/  # the trainer resizes it then
  echo "an astronaut" > $W/ds/astronaut.txt
  # VGG19 weights for the plugin: torchvision's random init (weights=None) in its own
  # layout, the features.* tensors as safetensors; fallback: the bench's file (same layout).
  VGG=$W/vgg19_random.safetensors
  timeout 90 python3 -c "import torch, torchvision; from safetensors.torch import save_file; torch.manual_seed(0); m = torchvision.models.vgg19(weights=None); save_file({k: v.contiguous() for k, v in m.state_dict().items() if k.startswith('features.')}, '$VGG')" \
    2>&1 | tail -3 | tee -a "$SUM"
  if [ ! -s $VGG ] && [ -s $BD/vgg19_bench_in.safetensors ]; then VGG=$BD/vgg19_bench_in.safetensors; fi
  say "== VGG19 weights for the perceptual run: $VGG ($( [ -s $VGG ] && du -h $VGG | cut -f1 || echo MISSING))"
  declare -A SIT PEAK SMI
  for loss in mse perceptual; do
    if [ $loss = perceptual ] && [ ! -s $VGG ]; then say "== SKIPPED the perceptual run: no VGG19 weights"; continue; fi
    if ! b=$(budget 200 60); then skip "the $loss training run" train; continue; fi
    if [ $loss = mse ]; then lp='/@LOSS_PARAMS@/d'; else lp="s#@LOSS_PARAMS@#loss_params: {vgg_path: $VGG}#"; fi
    sed -e "s#@RANK@#$RANK#g" -e "s#@OUT@#$W/out_$loss#" -e "s#@DS@#$W/ds#" -e "s#@STEPS@#$STEPS#" \
        -e "s#@TAEF1@#$TAEF1#" -e "s#@LOSS@#$loss#g" -e "$lp" -e "s#resolution: \[512\]#resolution: [$RES]#" \
        $root/bench/perceptual/flux1_dev_512.yaml.in > $W/flux_$loss.yaml
    # device-wide memory every 0.5 s (CUDA context and library workspaces included)
    timeout $(( b + 5 )) nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > $W/smi_$loss.txt 2>/dev/null &
    smi=$!
    t0=$(date +%s)
    timeout $b $B/bin/orakul run $W/flux_$loss.yaml >"$OUT/train_$loss.log" 2>&1
    rc=$?
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    say "== orakul run FLUX.1-dev ${RES}² rank $RANK loss_type $loss: rc=$rc in $(( $(date +%s) - t0 )) s (log train_$loss.log; 124 = timed out)"
    grep -E "^step|error|peak|LoRA:|model |perceptual:|refus" "$OUT/train_$loss.log" | tail -16 | tee -a "$SUM"
    SIT[$loss]=$(awk '/^step [0-9]+\//{split($2,a,"/"); if (a[1] >= 2) {s += $(NF-1); n++}} END{if (n) printf "%.4f", s/n; else print "-"}' "$OUT/train_$loss.log")
    PEAK[$loss]=$(grep -o "peak [0-9.]* GiB" "$OUT/train_$loss.log" | tail -1 | awk '{print $2}')
    SMI[$loss]=$(sort -n $W/smi_$loss.txt 2>/dev/null | tail -1)
  done
  say "== training step at FLUX.1-dev size, ${RES}², rank $RANK, $STEPS steps (s/it: mean of steps 2..$STEPS)"
  say "$(printf '%-11s %10s %20s %22s' loss s/it 'peak GiB (allocator)' 'max MiB (nvidia-smi)')"
  for loss in mse perceptual; do
    say "$(printf '%-11s %10s %20s %22s' $loss "${SIT[$loss]:--}" "${PEAK[$loss]:--}" "${SMI[$loss]:--}")"
  done
  say "$(awk -v a="${SIT[mse]:-}" -v b="${SIT[perceptual]:-}" -v p="${PEAK[mse]:-}" -v q="${PEAK[perceptual]:-}" \
    -v m="${SMI[mse]:-}" -v n="${SMI[perceptual]:-}" 'BEGIN{
      if (a+0 > 0 && b+0 > 0) printf "perceptual - mse: %+.4f s/it (%+.1f%%)", b-a, 100*(b-a)/a; else printf "perceptual - mse: s/it n/a";
      if (p != "" && q != "") printf ", %+.2f GiB peak allocated", q-p; else printf ", peak n/a";
      if (m != "" && n != "") printf ", %+.0f MiB nvidia-smi", n-m; printf "\n"}')"
fi
say "== done in $(el) s"
