#!/bin/bash
# bench/text/llm_gpu.sh — FLUX.2's text encoders (plugins/text_encoders/llm)
# on the GPU machine, in one call (about 4-6 minutes; each phase can run
# alone):
#   build    configure + build with CUDA into build-gpu/ (kept while warm):
#            the llm plugin, test_llm_cuda, test_llm_real
#   test     test_llm_cuda: the tiny fixtures' cases (Mistral3 / Qwen3 vs
#            transformers, left and right padding) in BF16 on the GPU
#   mistral  tests/reference/llm_encoder_ref.py --real: Mistral-Small-3.x's
#            language model at its real shape (hidden 5120, 32 / 8 heads of
#            128, intermediate 32768, vocab 131072; the 30 layers FLUX.2-dev
#            reads) with random bf16 weights made on the GPU (35 GB of shards
#            in $LLM_REAL_DIR: /dev/shm when it has room, else $TMPDIR; deleted
#            afterwards), transformers' bf16 and f32
#            forwards of 2 x 512 tokens (one row left-padded, one right);
#            then test_llm_real: orakul's BF16 forward against the f32 one,
#            max / mean abs error beside transformers' bf16 figures
#   qwen3    the same for Qwen3-4B (hidden 2560, 32 / 8 heads of 128,
#            intermediate 9728, vocab 151936; 27 of 36 layers)
# Logs in $OUT (llm_build.log, llm_cuda.log, llm_ref_<m>.log, llm_real_<m>.log).
# Needs python3 with torch and transformers (no diffusers).
# Usage (repo root; carry .gpu-deps): bash bench/text/llm_gpu.sh [build] [test] [mistral] [qwen3]
#        (no phase: all four)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
root=$PWD
if [ -d "$root/.gpu-deps/usr" ]; then
  export ORK_DEPS=$root/.gpu-deps/usr CMAKE_PREFIX_PATH=$root/.gpu-deps/usr
  export LD_LIBRARY_PATH=$ORK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ORK_DEPS/lib/x86_64-linux-gnu/pkgconfig
fi
export PYTHONUNBUFFERED=1
phases="$*"
[ -n "$phases" ] || phases="build test mistral qwen3"
B=$root/build-gpu
# the weights' folder: /dev/shm when it has 40 GB free (writing 35 GB there is seconds, not a minute), else $TMPDIR
shm_free=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)
if [ -z "${LLM_REAL_DIR:-}" ] && [ "${shm_free:-0}" -gt 41943040 ] 2>/dev/null; then LLM_REAL_DIR=/dev/shm/orakul_llm_real; fi
D=${LLM_REAL_DIR:-${TMPDIR:-/tmp}/orakul_llm_real}
for ph in $phases; do
  t0=$(date +%s)
  case $ph in
  build)
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    timeout 300 bash -c "cmake -S . -B $B -DORAKUL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=Release \
        >'$OUT/llm_build.log' 2>&1 && cmake --build $B -j16 --target orakul_plugin_llm test_llm_cuda test_llm_real \
        >>'$OUT/llm_build.log' 2>&1"
    rc=$?; echo "== build rc=$rc in $(( $(date +%s) - t0 )) s"
    [ $rc -eq 0 ] || { grep -E "error" "$OUT/llm_build.log" | head -20; tail -20 "$OUT/llm_build.log"; exit 1; } ;;
  test)
    (cd $B && timeout 120 ctest -R "^llm_cuda$" --output-on-failure >"$OUT/llm_cuda.log" 2>&1)
    echo "== test_llm_cuda rc=$? in $(( $(date +%s) - t0 )) s"
    grep -E "max err/M|FAIL|asserts|tests passed" "$OUT/llm_cuda.log" | head -20 ;;
  mistral|qwen3)
    mkdir -p "$D"; rm -rf "${D:?}/$ph" "$D/${ph}_ref.safetensors"
    df -h "$D" | tail -1
    timeout 330 python3 tests/reference/llm_encoder_ref.py --real "$D" --which "$ph" --device cuda \
      >"$OUT/llm_ref_$ph.log" 2>&1
    rc=$?; echo "== $ph reference rc=$rc in $(( $(date +%s) - t0 )) s"; tail -6 "$OUT/llm_ref_$ph.log"
    if [ $rc -eq 0 ]; then
      ORK_LLM_REAL_DIR=$D ORK_LLM_REAL=$ph timeout 240 $B/tests/text_encoders/test_llm_real >"$OUT/llm_real_$ph.log" 2>&1
      echo "== test_llm_real $ph rc=$? in $(( $(date +%s) - t0 )) s"
      grep -E "positions|load|blocks|FAIL|asserts|error" "$OUT/llm_real_$ph.log" | head -12
    fi
    rm -rf "${D:?}/$ph" ;;
  *) echo "unknown phase $ph (build test mistral qwen3)"; exit 2 ;;
  esac
done
