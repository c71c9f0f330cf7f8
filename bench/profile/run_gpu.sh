#!/bin/bash
# bench/profile/run_gpu.sh — the kernel-level profile of a FLUX.1-dev training
# step on the GPU machine (issue #31; docs/PERF.md "Where the 1024² step goes").
# Builds the tree (bench/train/run_gpu.sh build) and the CUPTI tracer
# (bench/profile/cupti_trace.c, against the machine's own CUPTI), then runs
# the phases named on the command line:
#   orakul   FLUX.1-dev 1024² r128 bf16 resident (bench/train/flux1_dev_1024.yaml.in),
#            once per value of KEEPS (ORAKUL_KEEP_BLOCKS; "auto" = unset, the
#            runner's own choice; default "0 auto": recompute every block, then
#            keep what fits), each under the tracer: its step lines and the
#            per-class breakdown of its last step (kernel_classes.py)
#   torch    ../shared/bench/torch_flux_ref.py (carried as .carry/shared/torch_flux_ref.py
#            or .carry/torch_flux_ref.py) under the tracer, TORCH_ARGS (default
#            "--preset dev --res 1024 --ranks 128 --steps 3 --compile")
#   ew8      bench_ew8 with ORK_CUDA_EW8=0 (scalar kernels) and 1 (the 8-wide path)
#   tests    ctest -R "$TESTS" (default the GPU tests that run the runner), once
#            plain and stream_cuda again with ORAKUL_KEEP_BLOCKS=3 (kept == streamed)
# Env: STEPS (orakul steps, default 5), RES (1024), RANK (128), TRAIN_TIMEOUT, TAG
# (appended to the orakul runs' file names and labels), CLASS_LINES (of each breakdown printed);
# DEADLINE (seconds from the start after which no further phase or run starts).
# Carry .gpu-deps, and the tree to run (a git archive, so no uncommitted edit travels).
# The opt-in 8-wide elementwise path's before/after in one call (~170 s of command):
#   ORK_CUDA_EW8=0 TAG=_ew8off KEEPS=auto bash bench/profile/run_gpu.sh orakul;
#   ORK_CUDA_EW8=1 TAG=_ew8on KEEPS=auto bash bench/profile/run_gpu.sh ew8 orakul tests
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; root=$PWD
phases=("$@"); [ ${#phases[@]} -eq 0 ] && phases=(orakul)
T0=$(date +%s)
bash bench/train/run_gpu.sh build | tail -1
B=$root/build-gpu
[ -x $B/bin/orakul ] || { echo "no orakul binary"; exit 1; }
export LD_LIBRARY_PATH=$root/.gpu-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
whl=$(python3 -c "import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$whl" ] && export ORK_CUDNN_LIB=${ORK_CUDNN_LIB:-$whl/libcudnn.so.9}
# the tracer, against this machine's CUPTI (the CUDA toolkit's, else the pip package's)
inc=; lib=
for d in /usr/local/cuda/extras/CUPTI $(python3 -c "import nvidia, os; [print(os.path.join(p, 'cu13')) for p in nvidia.__path__]" 2>/dev/null); do
  [ -z "$inc" ] && [ -f $d/include/cupti_activity.h ] && inc=$d/include
  [ -z "$lib" ] && lib=$(ls -d $d/lib64/libcupti.so* $d/lib/libcupti.so* 2>/dev/null | head -1)
done
tracer=/tmp/libork_cupti.so
if [ -n "$inc" ] && [ -n "$lib" ] && gcc -std=c11 -O2 -shared -fPIC -I$inc -I/usr/local/cuda/include bench/profile/cupti_trace.c \
     $lib -Wl,-rpath,$(dirname $lib) -o $tracer 2>"$OUT/tracer_build.log"; then
  echo "== tracer built against $inc ($lib)"
else
  echo "== no tracer (CUPTI include '$inc', lib '$lib'): $(head -3 "$OUT/tracer_build.log" 2>/dev/null)"; tracer=
fi
traced() { if [ -n "$tracer" ]; then CUDA_INJECTION64_PATH=$tracer ORK_CUPTI_OUT=$1 "${@:2}"; else "${@:2}"; fi; }
ds=/tmp/ork-bench/ds${RES:-1024}; mkdir -p $ds
python3 -c "from PIL import Image; Image.open('assets/photos/astronaut.png').convert('RGB').resize((${RES:-1024},${RES:-1024}), Image.BICUBIC).save('$ds/astronaut.png')"
echo "an astronaut" > $ds/astronaut.txt
taef1=$root/.carry/taef1; [ -d $taef1 ] || taef1=$root/.carry/shared/assets/taef1; [ -d $taef1 ] || taef1=$root/../../shared/assets/taef1
late() { [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - T0 )) -gt $DEADLINE ] && { echo "== $1 skipped: past DEADLINE"; return 0; }; return 1; }
for ph in "${phases[@]}"; do
  late "$ph" && continue
  case $ph in
  orakul)
    for keep in ${KEEPS:-0 auto}; do
      late "keep=$keep" && continue
      out=/tmp/ork-bench/out; rm -rf $out; y=/tmp/prof_$keep.yaml
      sed -e "s#@RANK@#${RANK:-128}#g" -e "s#@OUT@#$out#" -e "s#@DS@#$ds#" -e "s#@STEPS@#${STEPS:-5}#" -e "s#@BUDGET@#0#" \
          -e "s#@TAEF1@#$taef1#" -e "s#resolution: \[1024\]#resolution: [${RES:-1024}]#" bench/train/flux1_dev_1024.yaml.in > $y
      log=$OUT/orakul_keep_$keep${TAG:-}.log; tr=/tmp/trace_orakul_$keep${TAG:-}.tsv
      t0=$(date +%s)
      if [ $keep = auto ]; then traced $tr timeout ${TRAIN_TIMEOUT:-150} $B/bin/orakul run $y > $log 2>&1
      else ORAKUL_KEEP_BLOCKS=$keep traced $tr timeout ${TRAIN_TIMEOUT:-150} $B/bin/orakul run $y > $log 2>&1; fi
      echo "== orakul ${RES:-1024}² r${RANK:-128}, ORAKUL_KEEP_BLOCKS=$keep${TAG:+ ($TAG)}: rc=$? in $(( $(date +%s) - t0 )) s"
      grep -E "^step|error|peak|recompute:" $log | tail -9
      [ -s $tr ] && python3 bench/profile/kernel_classes.py $tr --label "orakul keep=$keep${TAG:-}" --flops ${FLOPS:-0} \
        --json $OUT/classes_orakul_$keep${TAG:-}.json > $OUT/classes_orakul_$keep${TAG:-}.txt && head -${CLASS_LINES:-40} $OUT/classes_orakul_$keep${TAG:-}.txt
    done ;;
  torch)
    ref=.carry/shared/torch_flux_ref.py; [ -f $ref ] || ref=.carry/torch_flux_ref.py; [ -f $ref ] || ref=$root/../../shared/torch_flux_ref.py
    tr=/tmp/trace_torch.tsv; t0=$(date +%s)
    traced $tr timeout ${TORCH_TIMEOUT:-200} python3 $ref ${TORCH_ARGS:---preset dev --res 1024 --ranks 128 --steps 3 --compile} > $OUT/torch.log 2>&1
    echo "== torch ${TORCH_ARGS:-compile}: rc=$? in $(( $(date +%s) - t0 )) s"; tail -1 $OUT/torch.log
    [ -s $tr ] && python3 bench/profile/kernel_classes.py $tr --label "torch" --flops ${FLOPS:-0} \
      --json $OUT/classes_torch.json | tee $OUT/classes_torch.txt ;;
  ew8)
    cmake --build $B -j16 --target bench_ew8 >> $OUT/build.log 2>&1
    for v in 0 1; do ORK_CUDA_EW8=$v timeout 30 $B/bench/profile/bench_ew8 2>&1 | tee $OUT/ew8_$v.txt; done ;;
  tests)
    t0=$(date +%s)
    # the test targets alone (a broken target elsewhere in the tree stops `make all` early)
    cmake --build $B -j16 --target test_stream_cuda test_train_trainable_stream_cuda test_runner_keep test_cuda_ew8 >> $OUT/build.log 2>&1
    (cd $B && timeout ${TESTS_TIMEOUT:-150} ctest -R "${TESTS:-^(stream_cuda|train_trainable_stream_cuda|runner_keep|cuda_ew8)$}" -j1 --output-on-failure > $OUT/ctest.log 2>&1)
    echo "== tests rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "Test +#|tests passed" $OUT/ctest.log
    t0=$(date +%s)
    (cd $B && ORAKUL_KEEP_BLOCKS=3 timeout 60 ctest -R '^stream_cuda$' -j1 --output-on-failure > $OUT/ctest_keep3.log 2>&1)
    echo "== stream_cuda with ORAKUL_KEEP_BLOCKS=3 (resident keeps, streamed recomputes): rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "Test +#|tests passed" $OUT/ctest_keep3.log ;;
  *) echo "unknown phase $ph" ;;
  esac
done
echo "== all in $(( $(date +%s) - T0 )) s"
