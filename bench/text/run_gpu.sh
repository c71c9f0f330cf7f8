#!/bin/bash
# bench/text/run_gpu.sh — the text conditioner on the GPU machine, in phases
# that each fit one 10-minute device command:
#   build   configure + build with CUDA: bench_text_encode, the t5clip, quant
#           and flux plugins, test_textcond_cuda (build-gpu/, kept while warm)
#   test    test_textcond_cuda (the CPU test's cases in BF16 on the GPU) and
#           test_ops_text_cuda (attention_bias's fused CUDA kernel against f64)
#   bench   bench/text/bench_text.py: FLUX.1's T5-XXL + CLIP-L encode at the
#           real shapes (random weights made once in /tmp/orakul_text_bench),
#           orakul (bf16, fp8, fp8 within 6 GiB, bf16 layer-major within 4 GiB)
#           and transformers (bf16, and fp8 = optimum-quanto qfloat8 as
#           ai-toolkit's quantize_te: the image lacks quanto, so its wheel
#           (and ninja's) from .carry/wheels/ is installed into $TMPDIR's
#           pylib first (pip download optimum-quanto ninja --no-deps -d
#           .carry/wheels); without it that line says skipped); one JSON line
#           per run in $OUT/text_bench.jsonl
#           orakul's rows carry retries (0 when the activation plan is
#           right) and act_peak_gib / act_planned_gib; --sweep runs bf16 at
#           8, 16 and 64 captions per chunk (the default caps at 32 for T5)
# Usage (repo root; carry .gpu-deps and .carry):
#        bash bench/text/run_gpu.sh build test bench 128   (one call, all rows)
#        or a phase at a time: ... build, then ... test bench [N, default 256]
# The phases share one deadline, TEXT_GPU_BUDGET_S (470 s) from the start, so
# that one device command (10 minutes at most) holds them all; a phase past
# it is cut (timeout) and says so.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
export PYTHONUNBUFFERED=1
phases=""; n=256
for a in "$@"; do case $a in build|test|bench) phases="$phases $a";; all) phases="build test bench";; *[!0-9]*) ;; *) n=$a;; esac; done
[ -n "$phases" ] || phases="build test bench"
B=$root/build-gpu
t_end=$(( $(date +%s) + ${TEXT_GPU_BUDGET_S:-470} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
for ph in $phases; do
  t0=$(date +%s)
  case $ph in
  build)
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
        >'$OUT/text_build.log' 2>&1 && cmake --build $B -j16 --target bench_text_encode orakul_plugin_t5clip \
        orakul_plugin_quant orakul_plugin_flux test_textcond_cuda test_ops_text_cuda >>'$OUT/text_build.log' 2>&1"
    rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
    [ $rc -eq 0 ] || { grep -E "error" "$OUT/text_build.log" | head -20; tail -20 "$OUT/text_build.log"; exit 1; } ;;
  test)
    (cd $B && timeout $(left) ctest -R "textcond_cuda|ops_text_cuda" --output-on-failure >"$OUT/textcond_cuda.log" 2>&1)
    echo "== test_textcond_cuda + test_ops_text_cuda rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "max err/M|FAIL|asserts|tests passed|retried|retries;" "$OUT/textcond_cuda.log" | head -60 ;;
  bench)
    pylib=${TMPDIR:-/tmp}/orakul_text_pylib
    whl=$(ls .carry/wheels/optimum_quanto-*.whl .carry/wheels/ninja-*.whl 2>/dev/null)
    if [ -n "$whl" ] && pip install -q --no-index --no-deps --target "$pylib" $whl >"$OUT/text_pip.log" 2>&1; then
      export PYTHONPATH=$pylib${PYTHONPATH:+:$PYTHONPATH} PATH=$pylib/bin:$PATH
    else echo "== no optimum-quanto wheel installed (.carry/wheels): transformers fp8 is skipped"; fi
    timeout $(left) python3 bench/text/bench_text.py --bin $B/bench/text/bench_text_encode --n "$n" \
      --out "$OUT/text_bench.jsonl" 2>"$OUT/text_bench.log"
    echo "== bench_text rc=$? in $(( $(date +%s) - t0 )) s"
    cat "$OUT/text_bench.jsonl"
    grep -E "error|text encode|did not fit|Traceback" "$OUT/text_bench.log" | head -30 ;;
  esac
done
