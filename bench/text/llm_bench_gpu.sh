#!/bin/bash
# bench/text/llm_bench_gpu.sh — FLUX.2's text encoders' speed on the GPU
# machine in one call (issue #29 point 5; about 4-6 minutes with a warm
# build-gpu/): captions per second of Mistral-Small-3.x 24B (the 30 layers
# FLUX.2-dev reads) resident in bf16; within 24 GiB in bf16 (streamed) and fp8
# (quantize_te qfloat8: 16.8 GiB, resident as planned, and streamed by force),
# and Qwen3-4B resident, each against
# transformers (resident bf16; and with accelerate's cpu_offload when
# accelerate imports — from .carry/wheels if the image lacks it — and the
# deadline leaves it the time it needs, else a row saying why), with the
# streamed runs' link efficiency (issue 8's: max(resident, link-only) /
# streamed). bench/text/bench_llm.py does the work; random bf16 weights at
# the real shapes, made on the GPU and written to /dev/shm when it has 40 GB
# free (else $TMPDIR), deleted afterwards.
#   build   configure + build with CUDA into build-gpu/: bench_llm_encode, the llm and quant plugins,
#           test_cond_plan_cuda, test_textcond_cuda, test_llm_stream_cuda
#   test    test_cond_plan_cuda (the encode's plan, streamed == resident bit for bit with any weight
#           cache, the device's memory given back after each encode), test_textcond_cuda (T5/CLIP,
#           layer-major == resident) and test_llm_stream_cuda (the layer-major encode through the
#           block streamer == resident == the per-block store, bit for bit, bf16 and qfloat8)
#   bench   bench_llm.py: one JSON line per run in $OUT/llm_bench.jsonl, the table for docs/PERF.md
# Usage (repo root; carry .gpu-deps and .carry): bash bench/text/llm_bench_gpu.sh [build] [test] [bench] [N]
#        (no phase: all three; N captions, default 64). One deadline for all, LLM_BENCH_BUDGET_S (570 s).
# Env: LLM_WHICH (mistral,qwen3), LLM_CASES (res,stream_bf16,fp8,stream_fp8), BENCH_LLM_SKIP=offload,
#      ORAKUL_TEXT_STREAM=0 (the streamed runs through the per-block store instead of the block streamer: the A/B).
# Wheels (optional, for the offload row): pip download accelerate psutil --no-deps -d .carry/wheels
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
export PYTHONUNBUFFERED=1
phases=""; n=64
for a in "$@"; do case $a in build|test|bench) phases="$phases $a";; *[!0-9]*) ;; *) n=$a;; esac; done
[ -n "$phases" ] || phases="build test bench"
B=$root/build-gpu
t_end=$(( $(date +%s) + ${LLM_BENCH_BUDGET_S:-570} ))
left() { local l=$(( t_end - $(date +%s) )); [ $l -gt 10 ] && echo $l || echo 10; }
shm_free=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)
if [ -z "${LLM_BENCH_DIR:-}" ] && [ "${shm_free:-0}" -gt 41943040 ] 2>/dev/null; then LLM_BENCH_DIR=/dev/shm/orakul_llm_bench; fi
D=${LLM_BENCH_DIR:-${TMPDIR:-/tmp}/orakul_llm_bench}
for ph in $phases; do
  t0=$(date +%s)
  case $ph in
  build)
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    timeout $(left) bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
        >'$OUT/llm_bench_build.log' 2>&1 && cmake --build $B -j16 --target bench_llm_encode orakul_plugin_llm \
        orakul_plugin_quant orakul_plugin_t5clip orakul_plugin_flux test_cond_plan_cuda test_textcond_cuda test_llm_stream_cuda \
        >>'$OUT/llm_bench_build.log' 2>&1"
    rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
    [ $rc -eq 0 ] || { grep -E "error" "$OUT/llm_bench_build.log" | head -20; tail -20 "$OUT/llm_bench_build.log"; exit 1; } ;;
  test)
    (cd $B && timeout 150 ctest -R "^(cond_plan_cuda|textcond_cuda|llm_stream_cuda)$" --output-on-failure >"$OUT/llm_bench_test.log" 2>&1)
    echo "== test_cond_plan_cuda + test_textcond_cuda + test_llm_stream_cuda rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "FAIL|asserts|tests passed|device free|checkpoint read [0-9]+ times|err/M|through the streamer" "$OUT/llm_bench_test.log" | head -30 ;;
  bench)
    if ! python3 -c "import accelerate" 2>/dev/null; then
      pylib=${TMPDIR:-/tmp}/orakul_llm_pylib
      whl=$(ls .carry/wheels/accelerate-*.whl .carry/wheels/psutil-*.whl 2>/dev/null)
      if [ -n "$whl" ] && pip install -q --no-index --no-deps --target "$pylib" $whl >"$OUT/llm_bench_pip.log" 2>&1; then
        export PYTHONPATH=$pylib${PYTHONPATH:+:$PYTHONPATH}
      fi
      python3 -c "import accelerate" 2>/dev/null || echo "== accelerate is not installed here (nor in .carry/wheels): no cpu_offload row"
    fi
    free -g | head -2; df -h "$(dirname "$D")" | tail -1
    rm -rf "$D"; mkdir -p "$D"
    timeout $(left) python3 bench/text/bench_llm.py --bin $B/bench/text/bench_llm_encode --dir "$D" --n "$n" \
      --which "${LLM_WHICH:-mistral,qwen3}" --cases "${LLM_CASES:-res,stream_bf16,fp8,stream_fp8}" \
      --deadline $(( t_end - 15 )) --out "$OUT/llm_bench.jsonl" 2>"$OUT/llm_bench.log" | tee "$OUT/llm_bench_table.md"
    echo "== bench_llm rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "made|saved|pinned|error|Traceback|timed out|text encode|checkpoint read" "$OUT/llm_bench.log" | head -30
    rm -rf "$D" ;;
  esac
done
